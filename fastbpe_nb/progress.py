"""Progress of the long calls (counting, merging, encoding files): one bar factory.

``progress_bar`` gives a tqdm bar when someone watches (stderr is a terminal, or a
notebook), and otherwise a ``LogProgress``: a plain line every ``FASTBPE_PROGRESS_SECONDS``
seconds (default 10) with the phase, done/total, rate and ETA, plus a line at the start
and at the end. A batch job's log then reads as lines, not as one line rewritten
thousands of times with carriage returns.
"""

from __future__ import annotations

import os
import sys
import time

#: Seconds between two log lines when stderr is not a terminal (env overrides it).
LOG_SECONDS = 10.0


def _watched(stream) -> bool:
    """A person sees ``stream`` update in place: a terminal, or a Jupyter kernel."""
    try:
        if stream.isatty():
            return True
    except (AttributeError, ValueError):
        return False
    ipython = sys.modules.get("IPython")
    shell = ipython.get_ipython() if ipython is not None else None
    return shell is not None and "IPKernelApp" in getattr(shell, "config", {})


def log_seconds() -> float:
    """The interval of the log lines: ``$FASTBPE_PROGRESS_SECONDS`` or LOG_SECONDS."""
    text = os.environ.get("FASTBPE_PROGRESS_SECONDS")
    try:
        value = float(text) if text else LOG_SECONDS
    except ValueError:
        value = LOG_SECONDS
    return value if value >= 0 else LOG_SECONDS


def progress_bar(total=None, desc="", unit="it", unit_scale=False):
    """A tqdm bar on a terminal or in a notebook, else a ``LogProgress`` (same calls:
    ``update``, ``n``, ``total``, ``set_postfix``, ``format_dict["elapsed"]``, ``close``)."""
    if _watched(sys.stderr):
        from tqdm.auto import tqdm

        return tqdm(total=total, desc=desc, unit=unit, unit_scale=unit_scale,
                    dynamic_ncols=True)
    return LogProgress(total, desc, unit, unit_scale)


def _clock(seconds: float) -> str:
    seconds = int(max(0, seconds))
    h, rest = divmod(seconds, 3600)
    return f"{h}:{rest // 60:02d}:{rest % 60:02d}" if h else f"{rest // 60}:{rest % 60:02d}"


class LogProgress:
    """Periodic progress lines on stderr for logs (see the module docstring)."""

    def __init__(self, total=None, desc="", unit="it", unit_scale=False, file=None,
                 interval=None):
        self.total = total
        self.desc = desc or "working"
        self.unit = unit
        self.unit_scale = unit_scale
        self.file = file if file is not None else sys.stderr
        self.interval = log_seconds() if interval is None else interval
        self.n = 0
        self.postfix = ""
        self.start = time.monotonic()
        self.last = self.start
        self.closed = False
        what = f" ({self._amount(total)} to do)" if total else ""
        self._write(f"{self.desc}: started{what}")

    @property
    def format_dict(self) -> dict:
        """The keys of tqdm's ``format_dict`` that callers read."""
        return {"n": self.n, "total": self.total, "elapsed": time.monotonic() - self.start}

    def _amount(self, n) -> str:
        if self.unit_scale:
            from tqdm import tqdm

            return tqdm.format_sizeof(n, self.unit)
        return f"{n:,} {self.unit}s"

    def line(self, final=False) -> str:
        """``desc: done[/total (p%)], rate, elapsed[, ETA]``."""
        elapsed = time.monotonic() - self.start
        rate = self.n / elapsed if elapsed > 0 else 0.0
        done = self._amount(self.n)
        if self.total:
            done += f" of {self._amount(self.total)} ({100 * self.n / self.total:.0f}%)"
        speed = self._amount(rate) if self.unit_scale else f"{rate:,.0f} {self.unit}s"
        text = f"{self.desc}: {'done, ' if final else ''}{done}, {speed}/s"
        text += f", {_clock(elapsed)} elapsed"
        if not final and self.total and rate > 0 and self.n < self.total:
            text += f", ETA {_clock((self.total - self.n) / rate)}"
        return text + (f" ({self.postfix})" if self.postfix else "")

    def _write(self, text: str) -> None:
        try:
            self.file.write(f"fastbpe: {text}\n")
            self.file.flush()
        except (OSError, ValueError):  # a closed log must not stop the work
            pass

    def update(self, k=1) -> None:
        self.n += k
        now = time.monotonic()
        if now - self.last >= self.interval:
            self.last = now
            self._write(self.line())

    def set_postfix(self, **values) -> None:
        self.postfix = ", ".join(f"{k}={v}" for k, v in values.items())

    def refresh(self) -> None:
        self._write(self.line())

    def close(self) -> None:
        if not self.closed:
            self.closed = True
            self._write(self.line(final=True))

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
