"""``ReadStats``: what the corpus readers read, skipped and cut, for the reports."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class ReadStats:
    """What the readers saw: reported by training and by ``fastbpe count``."""

    files: int = 0
    bytes_read: int = 0
    documents: int = 0
    null_rows: int = 0
    invalid_utf8_replaced: int = 0
    invalid_utf8_bytes: int = 0
    forced_cuts: int = 0  # text chunks cut inside a possible pre-token (see text_files)
    cuts_at_spaces: int = 0  # text chunks cut at a space (exact for the named patterns)
    skipped_files: list = field(default_factory=list)  # (path, reason): on_bad_input="skip"
    ignored: list = field(default_factory=list)  # (path, reason): hidden, not regular, twice

    def as_dict(self) -> dict:
        return {
            "files": self.files,
            "bytes_read": self.bytes_read,
            "documents": self.documents,
            "null_rows_skipped": self.null_rows,
            "invalid_utf8_sequences_replaced": self.invalid_utf8_replaced,
            "invalid_utf8_bytes": self.invalid_utf8_bytes,
            "forced_cuts": self.forced_cuts,
            "cuts_at_spaces": self.cuts_at_spaces,
            "files_skipped": [{"path": p, "reason": r} for p, r in self.skipped_files],
            "files_ignored": [{"path": p, "reason": r} for p, r in self.ignored],
        }
