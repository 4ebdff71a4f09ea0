"""Loading libflashc through ctypes, the C types of include/flashc.h, and status -> exception.

The library is loaded on first use, not on import, so ``import flashc`` always works; the first
call without a library raises OSError naming every place that was tried.

Lookup order:
  1. the environment variable FLASHC_LIBRARY (a path to the shared library);
  2. the repository's build folder, when this package runs from the source tree
     (<repo>/python/flashc -> <repo>/build/libflashc.so);
  3. the system: ctypes.util.find_library("flashc"), then the plain soname through the dynamic
     loader (LD_LIBRARY_PATH, ld.so.cache).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import sys
import threading
from pathlib import Path

# ---- C types (mirrors include/flashc.h; test_abi.py checks sizes/offsets against a C compiler) --

MAX_DIMS = 4  # FLASHC_MAX_DIMS

# flashc_dtype
F32, F16, BF16 = 0, 1, 2
DTYPE_NAMES = {F32: "float32", F16: "float16", BF16: "bfloat16"}

# flashc_device
DEVICE_CPU, DEVICE_CUDA = 0, 1

# flashc_status
OK = 0
ERR_NULL_POINTER = 1
ERR_INVALID_SHAPE = 2
ERR_INVALID_STRIDE = 3
ERR_HEAD_MISMATCH = 4
ERR_DIM_MISMATCH = 5
ERR_DTYPE_MISMATCH = 6
ERR_UNSUPPORTED_DTYPE = 7
ERR_OVERLAP = 8
ERR_OVERFLOW = 9
ERR_INVALID_ARGUMENT = 10
ERR_OUT_OF_MEMORY = 11
ERR_UNSUPPORTED = 12
ERR_DEVICE = 13


class Tensor(ctypes.Structure):
    """flashc_tensor: a strided view; strides in elements."""

    _fields_ = [
        ("data", ctypes.c_void_p),
        ("dtype", ctypes.c_int),
        ("device", ctypes.c_int),
        ("ndim", ctypes.c_int32),
        ("shape", ctypes.c_int64 * MAX_DIMS),
        ("stride", ctypes.c_int64 * MAX_DIMS),
    ]


class AttnParams(ctypes.Structure):
    """flashc_attn_params (sized: struct_size first). Build with new_attn_params()."""

    _fields_ = [
        ("struct_size", ctypes.c_size_t),
        ("has_softmax_scale", ctypes.c_int),
        ("softmax_scale", ctypes.c_float),
        ("causal", ctypes.c_int),
        ("window_left", ctypes.c_int64),
        ("window_right", ctypes.c_int64),
        ("softcap", ctypes.c_float),
        ("alibi_slopes", ctypes.c_void_p),
        ("block_q", ctypes.c_int64),
        ("block_k", ctypes.c_int64),
        ("num_threads", ctypes.c_int),
        ("num_splits", ctypes.c_int),
        ("deterministic", ctypes.c_int),
        ("workspace", ctypes.c_void_p),
        ("workspace_bytes", ctypes.c_size_t),
        ("cuda_stream", ctypes.c_void_p),
    ]


def new_attn_params() -> AttnParams:
    """The library's defaults (flashc_attn_params_default): window (-1, -1), default scale."""
    p = AttnParams()
    p.struct_size = ctypes.sizeof(AttnParams)
    p.window_left = -1
    p.window_right = -1
    return p


class AttnStats(ctypes.Structure):
    _fields_ = [
        ("struct_size", ctypes.c_size_t),
        ("tile_pairs", ctypes.c_int64),
        ("tile_pairs_total", ctypes.c_int64),
        ("block_q", ctypes.c_int64),
        ("block_k", ctypes.c_int64),
        ("num_splits", ctypes.c_int64),
        ("workspace_bytes", ctypes.c_int64),
    ]


def new_attn_stats() -> AttnStats:
    s = AttnStats()
    s.struct_size = ctypes.sizeof(AttnStats)
    return s


class RopeParams(ctypes.Structure):
    """flashc_rope_params (sized: struct_size first). Build with new_rope_params()."""

    _fields_ = [
        ("struct_size", ctypes.c_size_t),
        ("style", ctypes.c_int),
        ("rotary_dim", ctypes.c_int64),
        ("theta", ctypes.c_float),
        ("positions", ctypes.c_void_p),
        ("pos_stride", ctypes.c_int64 * 2),
        ("pos_offset", ctypes.c_int64),
        ("num_threads", ctypes.c_int),
        ("cuda_stream", ctypes.c_void_p),
    ]


ROPE_NEOX, ROPE_GPTJ = 0, 1


def new_rope_params() -> RopeParams:
    p = RopeParams()
    p.struct_size = ctypes.sizeof(RopeParams)
    return p


class MemStats(ctypes.Structure):
    _fields_ = [
        ("current_bytes", ctypes.c_int64),
        ("peak_bytes", ctypes.c_int64),
        ("alloc_count", ctypes.c_int64),
    ]


_T = ctypes.POINTER(Tensor)
_P = ctypes.POINTER(AttnParams)
_S = ctypes.POINTER(AttnStats)
_R = ctypes.POINTER(RopeParams)
_status = ctypes.c_int

# name -> (restype, argtypes)
_SIGNATURES = {
    "flashc_status_string": (ctypes.c_char_p, [ctypes.c_int]),
    "flashc_last_error": (ctypes.c_char_p, []),
    "flashc_dtype_size": (ctypes.c_size_t, [ctypes.c_int]),
    "flashc_set_num_threads": (None, [ctypes.c_int]),
    "flashc_get_num_threads": (ctypes.c_int, []),
    "flashc_mem_get": (MemStats, []),
    "flashc_mem_reset_peak": (None, []),
    "flashc_attn_fwd": (_status, [_P, _T, _T, _T, _T, _T, _S]),
    "flashc_attn_fwd_naive": (_status, [_P, _T, _T, _T, _T, _T, _S]),
    "flashc_attn_fwd_supported": (_status, [_P, _T, _T, _T, _T, _T]),
    "flashc_attn_bwd": (_status, [_P, _T, _T, _T, _T, _T, _T, _T, _T, _T, _S]),
    "flashc_attn_bwd_naive": (_status, [_P, _T, _T, _T, _T, _T, _T, _T, _T, _T, _S]),
    "flashc_rmsnorm": (_status, [_T, _T, ctypes.c_float, _T]),
    "flashc_rmsnorm_residual": (_status, [_T, _T, _T, ctypes.c_float, _T]),
    "flashc_swiglu": (_status, [_T, _T]),
    "flashc_attn_fwd_unfused": (_status, [_P, _T, _T, _T, _T, _T, _S]),
    "flashc_rmsnorm_bwd": (_status, [_T, _T, _T, _T, ctypes.c_float, _T, _T]),
    "flashc_rmsnorm_bwd_naive": (_status, [_T, _T, _T, _T, ctypes.c_float, _T, _T]),
    "flashc_swiglu_bwd": (_status, [_T, _T, _T]),
    "flashc_swiglu_bwd_naive": (_status, [_T, _T, _T]),
    "flashc_rope": (_status, [_R, _T, _T, _T, _T]),
    "flashc_rope_bwd": (_status, [_R, _T, _T, _T, _T]),
    "flashc_rope_naive": (_status, [_R, _T, _T, _T, _T, ctypes.c_int]),
    "flashc_build_info": (ctypes.c_char_p, []),
    "flashc_cuda_available": (ctypes.c_int, []),
}

# ---- errors -------------------------------------------------------------------------------


class FlashcError(Exception):
    """Base of every error a flashc call reports. ``status`` is the flashc_status value,
    ``detail`` the library's flashc_last_error() text."""

    def __init__(self, message: str, status: int, detail: str):
        super().__init__(message)
        self.status = status
        self.detail = detail


class FlashcTypeError(FlashcError, TypeError):
    pass


class FlashcValueError(FlashcError, ValueError):
    pass


class FlashcNotImplementedError(FlashcError, NotImplementedError):
    pass


class FlashcMemoryError(FlashcError, MemoryError):
    pass


class FlashcRuntimeError(FlashcError, RuntimeError):
    pass


# dtype problems are TypeErrors; malformed shapes, strides and scalars are ValueErrors; a valid
# request the build cannot serve is NotImplementedError; the rest (NULL pointer: a binding bug,
# device errors) is RuntimeError.
_EXCEPTION_OF_STATUS = {
    ERR_UNSUPPORTED_DTYPE: FlashcTypeError,
    ERR_DTYPE_MISMATCH: FlashcTypeError,
    ERR_INVALID_SHAPE: FlashcValueError,
    ERR_INVALID_STRIDE: FlashcValueError,
    ERR_HEAD_MISMATCH: FlashcValueError,
    ERR_DIM_MISMATCH: FlashcValueError,
    ERR_OVERLAP: FlashcValueError,
    ERR_OVERFLOW: FlashcValueError,
    ERR_INVALID_ARGUMENT: FlashcValueError,
    ERR_OUT_OF_MEMORY: FlashcMemoryError,
    ERR_UNSUPPORTED: FlashcNotImplementedError,
}


def exception_for(status: int, detail: str) -> FlashcError:
    """The exception for a non-OK status; the message always carries the library's detail."""
    lib = library()
    name = lib.flashc_status_string(status).decode("utf-8", "replace")
    cls = _EXCEPTION_OF_STATUS.get(status, FlashcRuntimeError)
    return cls(f"flashc: {name} (status {status}): {detail or '(no detail)'}", status, detail)


def check(status: int) -> None:
    """Raises the mapped exception unless status is FLASHC_OK. Must run on the thread that made
    the call: flashc_last_error() is per thread."""
    if status != OK:
        raise exception_for(status, last_error())


def last_error() -> str:
    """flashc_last_error() of the calling thread."""
    return library().flashc_last_error().decode("utf-8", "replace")


# ---- loading ------------------------------------------------------------------------------

if sys.platform == "darwin":
    _SONAMES = ["libflashc.dylib", "libflashc.0.dylib"]
elif sys.platform == "win32":
    _SONAMES = ["flashc.dll", "libflashc.dll"]
else:
    _SONAMES = ["libflashc.so", "libflashc.so.0"]

_lock = threading.Lock()
_lib: ctypes.CDLL | None = None
_lib_path: str | None = None


def _source_tree_candidates() -> list[Path]:
    """<repo>/build/libflashc.so when this file is <repo>/python/flashc/_lib.py; the repo is
    recognised by include/flashc.h, so an installed copy never picks up an unrelated build/."""
    repo = Path(__file__).resolve().parent.parent.parent
    if not (repo / "include" / "flashc.h").is_file():
        return []
    return [repo / "build" / name for name in _SONAMES]


def _open(path: str) -> ctypes.CDLL:
    lib = ctypes.CDLL(path)
    missing = [name for name in _SIGNATURES if not hasattr(lib, name)]
    if missing:
        raise OSError(f"{path} is not a compatible libflashc: missing {', '.join(missing)}")
    for name, (restype, argtypes) in _SIGNATURES.items():
        fn = getattr(lib, name)
        fn.restype = restype
        fn.argtypes = argtypes
    return lib


def _load() -> tuple[ctypes.CDLL, str]:
    tried: list[str] = []
    env = os.environ.get("FLASHC_LIBRARY")
    if env:
        # An explicit path is an instruction: if it fails, say so rather than fall back silently.
        try:
            return _open(env), env
        except OSError as e:
            raise OSError(f"flashc: FLASHC_LIBRARY={env} could not be loaded: {e}") from e
    tried.append("FLASHC_LIBRARY (not set)")

    for cand in _source_tree_candidates():
        if cand.exists():
            try:
                return _open(str(cand)), str(cand)
            except OSError as e:
                tried.append(f"{cand} ({e})")
        else:
            tried.append(f"{cand} (no such file)")
    if not _source_tree_candidates():
        tried.append("the repository build folder (not running from a source tree)")

    found = ctypes.util.find_library("flashc")
    names = ([found] if found else []) + _SONAMES
    if not found:
        tried.append('ctypes.util.find_library("flashc") (nothing found)')
    for name in names:
        try:
            return _open(name), name
        except OSError as e:
            tried.append(f"{name} via the dynamic loader ({e})")

    raise OSError(
        "flashc: cannot load libflashc. Build it (cmake -S . -B build && cmake --build build) "
        "or set FLASHC_LIBRARY to the path of libflashc.so. Tried:\n  " + "\n  ".join(tried)
    )


def library() -> ctypes.CDLL:
    """The loaded libflashc (loaded on first use)."""
    global _lib, _lib_path
    if _lib is None:
        with _lock:
            if _lib is None:
                _lib, _lib_path = _load()
    return _lib


def library_path() -> str:
    """Where libflashc was loaded from (loads it if needed)."""
    library()
    assert _lib_path is not None
    return _lib_path
