"""File formats: our model file, and (later) Arrow/Parquet corpora and foreign vocabularies."""
