"""Memory probes for code running inside a case subprocess (Linux /proc)."""


def _status(field):
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1]) * 1024
    return 0


def rss_now_peak():
    """(current RSS, peak RSS since the last reset) in bytes."""
    return _status("VmRSS"), _status("VmHWM")


def reset_peak_rss() -> bool:
    """Reset the peak (VmHWM) to the current RSS: write 5 to /proc/self/clear_refs."""
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        return True
    except OSError:
        return False
