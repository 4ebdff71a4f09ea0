"""Fused row-wise ops: RMSNorm (with optional residual add) and SwiGLU, host memory only.

Leading dimensions are flattened to rows: x (..., D) is treated as (T, D). Inputs may be strided
views; outputs are new contiguous arrays of the input's kind and dtype. These ops have no
backward: a torch tensor that requires a gradient is refused (NotImplementedError) rather than
silently detached.
"""

from __future__ import annotations

from . import _arrays, _lib


def _refuse_grad(fn: str, *xs) -> None:
    if _arrays.is_torch(xs[0]):
        torch = _arrays._torch()
        if torch.is_grad_enabled() and any(x is not None and x.requires_grad for x in xs):
            raise NotImplementedError(
                f"flashc: {fn} has no backward; call it under torch.no_grad() or on tensors "
                "that do not require grad"
            )


def rms_norm(x, weight, eps=1e-6, residual=None):
    """RMSNorm over the last dimension: y = x / sqrt(mean(x**2, -1) + eps) * weight.

    x (..., D), weight (D,), same dtype; y like x.

    With residual (same shape as x): the residual stream is updated first, h = x + residual, and
    the function returns (y, h) with y = rms_norm(h) * weight -- the "prenorm" convention of
    flash-attn's fused norms (rms_norm_fn(..., residual=r, prenorm=True)). The caller's x and
    residual are never modified: h is a new array (the library writes the sum into a copy of x).
    """
    _refuse_grad("rms_norm", x, weight, residual)
    _arrays.common_kind({"x": x, "weight": weight, "residual": residual})
    if weight.ndim != 1:
        raise ValueError(f"flashc: weight has shape {tuple(weight.shape)}; expected (D,)")
    if x.ndim == 0:
        raise ValueError("flashc: x is a scalar; expected (..., D)")
    width = x.shape[-1]
    y = _arrays.empty_like_kind(x, tuple(x.shape))
    vw = _arrays.view("weight", weight)
    vy = _arrays.view("y", _arrays.rows_2d("y", y, width))
    lib = _lib.library()
    if residual is None:
        vx = _arrays.view("x", _arrays.rows_2d("x", x, width))
        _lib.check(lib.flashc_rmsnorm(vx.ref, vw.ref, float(eps), vy.ref))
        return y
    if tuple(residual.shape) != tuple(x.shape):
        raise ValueError(
            f"flashc: residual has shape {tuple(residual.shape)} but x has {tuple(x.shape)}"
        )
    h = _arrays.copy_of(x)
    vh = _arrays.view("x", _arrays.rows_2d("x", h, width))
    vr = _arrays.view("residual", _arrays.rows_2d("residual", residual, width))
    _lib.check(lib.flashc_rmsnorm_residual(vh.ref, vr.ref, vw.ref, float(eps), vy.ref))
    return y, h


def swiglu(gate_up):
    """SwiGLU on the fused gate|up projection: gate_up (..., 2*I) -> out (..., I),
    out = silu(gate) * up with gate = gate_up[..., :I], up = gate_up[..., I:],
    silu(g) = g / (1 + exp(-g))."""
    _refuse_grad("swiglu", gate_up)
    _arrays.kind_of("gate_up", gate_up)
    if gate_up.ndim == 0:
        raise ValueError("flashc: gate_up is a scalar; expected (..., 2*I)")
    width = gate_up.shape[-1]
    # An odd width is the library's to refuse (with its message); max(.., 1) keeps out a
    # valid array so the call reaches that check.
    out = _arrays.empty_like_kind(gate_up, tuple(gate_up.shape[:-1]) + (max(width // 2, 1),))
    vg = _arrays.view("gate_up", _arrays.rows_2d("gate_up", gate_up, width))
    vo = _arrays.view("out", _arrays.rows_2d("out", out, out.shape[-1]))
    _lib.check(_lib.library().flashc_swiglu(vg.ref, vo.ref))
    return out
