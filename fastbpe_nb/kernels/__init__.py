"""Numba kernels: ``@njit(cache=True, nogil=True)`` functions over flat NumPy arrays only.

No I/O, no Python objects, no mutable globals. Inputs are validated and their dtypes fixed
by the Python layer before a kernel sees them (Numba does not bounds-check). Importing
these modules compiles nothing: compilation happens on the first call, then is cached.
"""
