"""What every NumPy/PyTorch peer of the benchmarks shares: OpenBLAS as the system configures
it by default. This machine exports OPENBLAS_CORETYPE and OPENBLAS_L2_SIZE; a peer runs with
both unset (the script re-executes itself once without them, since OpenBLAS reads them when it
is loaded) and reports the core OpenBLAS chose. The benchmarks force no core type."""

import ctypes
import ctypes.util
import os
import sys

_VARS = ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE")


def clean_openblas_env():
    """Call before importing numpy or torch."""
    if any(v in os.environ for v in _VARS):
        env = {k: v for k, v in os.environ.items() if k not in _VARS}
        os.execve(sys.executable, [sys.executable] + sys.argv, env)


def openblas_core():
    """The kernel set OpenBLAS runs ("Haswell", "SkylakeX", "Prescott", ...), or "unknown"."""
    for name in ("openblas", "openblas64", "openblasp-r0.3.21"):
        path = ctypes.util.find_library(name)
        if not path:
            continue
        try:
            lib = ctypes.CDLL(path)
            lib.openblas_get_corename.restype = ctypes.c_char_p
            return lib.openblas_get_corename().decode()
        except (OSError, AttributeError):
            continue
    return "unknown"
