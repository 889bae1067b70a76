"""Counting, training and encoding on clusters: an engine-neutral core and thin adapters.

``core`` holds everything that decides a result (counting one batch or file into a counts
table, exact merges, hash partitions, the first-occurrence order, training from the tables)
in plain pyarrow + our kernels, with no engine types. Each adapter (``dask_engine`` for
``dask.distributed``, ``ray_engine`` for Ray) only ships work to workers and gathers the
tables, so every engine gives the same bytes as one process (docs/clusters.md).
"""
