"""flashc: IO-aware attention (FlashAttention) and fused LLM ops, from Python.

A ctypes binding of libflashc (include/flashc.h) with flash-attn's function signatures, on numpy
arrays and torch tensors (CPU and CUDA). Replace

    from flash_attn import flash_attn_func
with
    from flashc import flash_attn_func

Importing never loads the library; the first call does (see flashc._lib for where it looks:
$FLASHC_LIBRARY, then the library bundled by `pip install`, then <repo>/build, then the system),
and accepts it only if its flashc_version() is this package's __version__.
`python -m flashc` prints what was loaded.
"""

from __future__ import annotations

from . import _lib
from ._lib import (
    FlashcError,
    FlashcMemoryError,
    FlashcNotImplementedError,
    FlashcRuntimeError,
    FlashcTypeError,
    FlashcValueError,
    last_error,
    library_path,
)
from .attention import (
    attn_fwd_supported,
    flash_attn_backward,
    flash_attn_func,
    flash_attn_kvpacked_func,
    flash_attn_qkvpacked_func,
    flash_attn_varlen_backward,
    flash_attn_varlen_func,
    flash_attn_varlen_kvpacked_func,
    flash_attn_varlen_qkvpacked_func,
    flash_attn_with_kvcache,
)
from .ops import apply_rotary_emb, rms_norm, rms_norm_backward, swiglu, swiglu_backward

# From CMakeLists.txt's project(VERSION), through flashc/_version.py in an installed package.
__version__ = _lib.VERSION

__all__ = [
    "flash_attn_func",
    "flash_attn_qkvpacked_func",
    "flash_attn_kvpacked_func",
    "flash_attn_varlen_func",
    "flash_attn_varlen_qkvpacked_func",
    "flash_attn_varlen_kvpacked_func",
    "flash_attn_with_kvcache",
    "flash_attn_backward",
    "flash_attn_varlen_backward",
    "attn_fwd_supported",
    "rms_norm",
    "rms_norm_backward",
    "swiglu",
    "swiglu_backward",
    "apply_rotary_emb",
    "build_info",
    "library_version",
    "cuda_available",
    "set_num_threads",
    "get_num_threads",
    "mem_stats",
    "last_error",
    "library_path",
    "FlashcError",
    "FlashcTypeError",
    "FlashcValueError",
    "FlashcNotImplementedError",
    "FlashcMemoryError",
    "FlashcRuntimeError",
]


def library_version() -> str:
    """flashc_version() of the loaded library (equal to __version__: loading checks it)."""
    return _lib.library().flashc_version().decode("utf-8", "replace")


def build_info() -> str:
    """flashc_build_info(): version and what the binary was built with, e.g.
    "0.2.0 (cpu: avx2, openmp; cuda: sm_80 sm_90a, nvcc 13.0)"."""
    return _lib.library().flashc_build_info().decode("utf-8", "replace")


def cuda_available() -> bool:
    """Whether the loaded library has the CUDA backend and sees a CUDA device."""
    return bool(_lib.library().flashc_cuda_available())


def set_num_threads(n: int) -> None:
    """Threads for CPU kernels (n <= 0 restores OpenMP's default)."""
    _lib.library().flashc_set_num_threads(int(n))


def get_num_threads() -> int:
    return int(_lib.library().flashc_get_num_threads())


def mem_stats(reset_peak: bool = False) -> dict:
    """Host memory the library allocated for itself: {"current_bytes", "peak_bytes",
    "alloc_count"}; reset_peak=True resets the peak after reading."""
    lib = _lib.library()
    s = lib.flashc_mem_get()
    if reset_peak:
        lib.flashc_mem_reset_peak()
    return {"current_bytes": s.current_bytes, "peak_bytes": s.peak_bytes, "alloc_count": s.alloc_count}
