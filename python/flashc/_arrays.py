"""numpy arrays and torch tensors -> flashc_tensor views, and allocation of outputs alike.

torch is never imported here: a torch tensor can only exist if the caller imported torch, so
``sys.modules.get("torch")`` tells whether an object may be one.

Views are passed without copying: strides in elements go straight to the library, which accepts
any non-negative strides. Only numpy views the library cannot express are copied (documented in
README): negative strides (x[::-1]), byte strides that are not a multiple of the item size, and
data not aligned to its item size (C may not read a float through a misaligned pointer).
"""

from __future__ import annotations

import contextlib
import ctypes
import sys
from typing import Any

import numpy as np

from . import _lib

_NUMPY_DTYPES = {
    np.dtype(np.float32): _lib.F32,
    np.dtype(np.float16): _lib.F16,
    np.dtype(np.int32): _lib.I32,
}


def _torch():
    return sys.modules.get("torch")


def is_torch(x: Any) -> bool:
    torch = _torch()
    return torch is not None and isinstance(x, torch.Tensor)


def kind_of(name: str, x: Any) -> str:
    """"numpy" or "torch"; TypeError for anything else."""
    if isinstance(x, np.ndarray):
        return "numpy"
    if is_torch(x):
        return "torch"
    raise TypeError(f"flashc: {name} must be a numpy.ndarray or a torch.Tensor, not {type(x).__name__}")


def common_kind(named: dict[str, Any]) -> str:
    """All arrays must be of one kind (numpy or torch) and, for torch, on one device."""
    kinds = {n: kind_of(n, x) for n, x in named.items() if x is not None}
    if len(set(kinds.values())) > 1:
        desc = ", ".join(f"{n} is {k}" for n, k in kinds.items())
        raise TypeError(f"flashc: mixing numpy arrays and torch tensors ({desc})")
    kind = next(iter(kinds.values()))
    if kind == "torch":
        devices = {n: x.device for n, x in named.items() if x is not None}
        if len(set(devices.values())) > 1:
            desc = ", ".join(f"{n} on {d}" for n, d in devices.items())
            raise ValueError(f"flashc: tensors on different devices ({desc})")
    return kind


def _numpy_dtype_code(name: str, dt: np.dtype) -> int:
    if dt in _NUMPY_DTYPES:
        return _NUMPY_DTYPES[dt]
    # ml_dtypes.bfloat16 (used by JAX) has no numpy type object; recognise it by name and size.
    if dt.name == "bfloat16" and dt.itemsize == 2:
        return _lib.BF16
    raise TypeError(
        f"flashc: {name}.dtype = {dt} is not a flashc dtype (float32, float16, bfloat16, int32)"
    )


_TORCH_DTYPES: dict = {}  # filled on first use (torch is imported by then)


def _torch_dtype_code(name: str, dt: Any) -> int:
    table = _TORCH_DTYPES
    if not table:
        torch = _torch()
        table.update({torch.float32: _lib.F32, torch.float16: _lib.F16,
                      torch.bfloat16: _lib.BF16, torch.int32: _lib.I32})
    if dt not in table:
        raise TypeError(
            f"flashc: {name}.dtype = {dt} is not a flashc dtype (float32, float16, bfloat16, int32)"
        )
    return table[dt]


class View:
    """A flashc_tensor plus the Python object that owns its memory (kept alive by this)."""

    __slots__ = ("owner", "c")

    def __init__(self, owner: Any, c: _lib.Tensor):
        self.owner = owner
        self.c = c

    @property
    def ref(self):
        return ctypes.byref(self.c)


def _fill(c: _lib.Tensor, name: str, shape, strides) -> None:
    if len(shape) > _lib.MAX_DIMS:
        raise ValueError(
            f"flashc: {name} has {len(shape)} dimensions; flashc tensors have at most {_lib.MAX_DIMS}"
        )
    if 0 in shape:
        raise ValueError(f"flashc: {name} has shape {tuple(shape)}; every size must be > 0")
    n = c.ndim = len(shape)
    c.shape[:n] = shape  # (slice assignment: one call, not one per dimension)
    c.stride[:n] = strides


def numpy_view(name: str, x: np.ndarray) -> View:
    code = _numpy_dtype_code(name, x.dtype)
    item = x.dtype.itemsize
    if not x.flags.aligned or any(s < 0 or s % item for s in x.strides):
        # a layout flashc_tensor cannot express (see module doc); a fresh array, since
        # ascontiguousarray returns a misaligned but contiguous x unchanged
        x = np.array(x, order="C", copy=True)
    c = _lib.Tensor(x.ctypes.data, code, _lib.DEVICE_CPU)
    _fill(c, name, x.shape, [s // item for s in x.strides])
    return View(x, c)


def torch_view(name: str, x: Any) -> View:
    code = _torch_dtype_code(name, x.dtype)  # real dtypes only: never a conjugate view
    if x.is_cpu:  # (is_cpu / is_cuda: no torch.device object made per call)
        device = _lib.DEVICE_CPU
    elif x.is_cuda:
        device = _lib.DEVICE_CUDA
    else:
        raise NotImplementedError(f"flashc: {name} is on device {x.device}; flashc serves cpu and cuda")
    if x.is_neg():
        x = x.resolve_neg()
    c = _lib.Tensor(x.data_ptr(), code, device)
    _fill(c, name, x.shape, x.stride())
    return View(x, c)


def view(name: str, x: Any) -> View:
    return numpy_view(name, x) if isinstance(x, np.ndarray) else torch_view(name, x)


def inplace_view(name: str, x: Any) -> View:
    """A view the library writes into (a KV cache): refused rather than copied when the layout
    would need a copy, or when a numpy array is read-only, since the writes would be lost."""
    if isinstance(x, np.ndarray) and not x.flags.writeable:
        raise ValueError(f"flashc: {name} is read-only; it is updated in place")
    v = view(name, x)
    if v.owner is not x:
        raise ValueError(
            f"flashc: {name} has a layout flashc cannot address without a copy (negative or "
            "unaligned strides, or a conjugate/negative view); it is updated in place, so pass a "
            "plain array"
        )
    return v


def int32_index(name: str, x: Any, like: Any) -> Any:
    """An index tensor (cu_seqlens, cache_seqlens, block_table, cache_batch_idx) as int32 of
    like's kind and device: int32 is used as given, other integer types are converted (values
    checked to fit), anything else is a TypeError."""
    if isinstance(like, np.ndarray):
        a = np.asarray(x)
        if a.dtype == np.int32:
            return np.ascontiguousarray(a)
        if not np.issubdtype(a.dtype, np.integer):
            raise TypeError(f"flashc: {name} must be an integer array (int32), not {a.dtype}")
        if a.size and (a.min() < -(2**31) or a.max() >= 2**31):
            raise ValueError(f"flashc: {name} has values outside the int32 range")
        return np.ascontiguousarray(a.astype(np.int32))
    torch = _torch()
    t = x if isinstance(x, torch.Tensor) else torch.as_tensor(x)
    if t.dtype == torch.int32 and t.device == like.device:
        return t.contiguous()
    if t.dtype.is_floating_point or t.dtype.is_complex or t.dtype == torch.bool:
        raise TypeError(f"flashc: {name} must be an integer tensor (int32), not {t.dtype}")
    if t.numel() and (int(t.min()) < -(2**31) or int(t.max()) >= 2**31):
        raise ValueError(f"flashc: {name} has values outside the int32 range")
    return t.to(device=like.device, dtype=torch.int32).contiguous()


def empty_like_kind(like: Any, shape, dtype=None) -> Any:
    """A new contiguous array of like's kind (and device); dtype None means like's dtype,
    "float32" means float32 in either library."""
    if isinstance(like, np.ndarray):
        dt = np.float32 if dtype == "float32" else (like.dtype if dtype is None else dtype)
        return np.empty(shape, dtype=dt)
    torch = _torch()
    dt = torch.float32 if dtype == "float32" else (like.dtype if dtype is None else dtype)
    return torch.empty(shape, dtype=dt, device=like.device)


def is_plain(x: Any) -> bool:
    """Laid out like a fresh allocation: contiguous, from the start of its buffer (numpy:
    contiguous and aligned)."""
    if isinstance(x, np.ndarray):
        return x.flags.c_contiguous and x.flags.aligned
    return x.is_contiguous() and x.storage_offset() == 0


def copy_of(x: Any) -> Any:
    """A contiguous copy (never aliases x)."""
    if isinstance(x, np.ndarray):
        return np.array(x, order="C", copy=True)
    return x.detach().clone(memory_format=_torch().contiguous_format)


def rows_2d(name: str, x: Any, width: int) -> Any:
    """x (..., width) as (T, width): a view when the layout allows, else a copy (an input only)."""
    if x.ndim == 0:
        raise ValueError(f"flashc: {name} is a scalar; expected (..., {width})")
    return x.reshape(-1, width)


@contextlib.contextmanager
def device_scope(x: Any):
    """Makes x's CUDA device current for the call (the library works on the current device) and
    yields the stream to pass as params.cuda_stream (None for host arrays)."""
    if is_torch(x) and x.device.type == "cuda":
        torch = _torch()
        with torch.cuda.device(x.device):
            yield torch.cuda.current_stream(x.device).cuda_stream
    else:
        yield None


@contextlib.contextmanager
def default_stream_scope(x: Any):
    """For the row ops, which the C API launches on the CUDA default stream: x's device is made
    current, the default stream waits for the caller's current stream before the call, and the
    current stream waits for the default stream after it, so the work is ordered as if it had
    run on the current stream. A no-op for host arrays and when the current stream is the
    default one."""
    if is_torch(x) and x.device.type == "cuda":
        torch = _torch()
        with torch.cuda.device(x.device):
            cur = torch.cuda.current_stream(x.device)
            dflt = torch.cuda.default_stream(x.device)
            if cur == dflt:
                yield
                return
            dflt.wait_stream(cur)
            try:
                yield
            finally:
                cur.wait_stream(dflt)
    else:
        yield
