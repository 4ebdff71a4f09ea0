"""Fused row-wise ops and rotary embedding: RMSNorm (with optional residual add), SwiGLU and
apply_rotary_emb, on numpy arrays and torch tensors (CPU and CUDA), with autograd for torch.

Leading dimensions are flattened to rows: x (..., D) is treated as (T, D). Inputs may be strided
views; outputs are new contiguous arrays of the input's kind and dtype. A torch tensor that
requires a gradient goes through a torch.autograd.Function (flashc._autograd) whose backward is
the library's: flashc_rmsnorm_bwd, flashc_swiglu_bwd, flashc_rope_bwd.

CUDA: the row ops run on the default stream of the tensors' device, ordered after and before
the caller's current stream (_arrays.default_stream_scope); the rotary embedding runs on the
current stream itself.
"""

from __future__ import annotations

import ctypes

import numpy as np

from . import _arrays, _lib


def _needs_grad(*xs) -> bool:
    if not xs or not _arrays.is_torch(xs[0]):
        return False
    torch = _arrays._torch()
    return torch.is_grad_enabled() and any(x is not None and x.requires_grad for x in xs)


def _detach(x):
    return x.detach() if _arrays.is_torch(x) else x


# ---- RMSNorm -------------------------------------------------------------------------------


def rms_norm(x, weight, eps=1e-6, residual=None):
    """RMSNorm over the last dimension: y = x / sqrt(mean(x**2, -1) + eps) * weight.

    x (..., D), weight (D,), same dtype; y like x.

    With residual (same shape as x): the residual stream is updated first, h = x + residual, and
    the function returns (y, h) with y = rms_norm(h) * weight -- the "prenorm" convention of
    flash-attn's fused norms (rms_norm_fn(..., residual=r, prenorm=True)). The caller's x and
    residual are never modified: h is a new array (the library writes the sum into a copy of x).

    torch autograd: gradients reach x, weight and residual (dx = dresidual, as h = x + residual),
    h's own gradient included.
    """
    _arrays.common_kind({"x": x, "weight": weight, "residual": residual})
    if weight.ndim != 1:
        raise ValueError(f"flashc: weight has shape {tuple(weight.shape)}; expected (D,)")
    if x.ndim == 0:
        raise ValueError("flashc: x is a scalar; expected (..., D)")
    if residual is not None and tuple(residual.shape) != tuple(x.shape):
        raise ValueError(
            f"flashc: residual has shape {tuple(residual.shape)} but x has {tuple(x.shape)}"
        )
    if _needs_grad(x, weight, residual):
        from ._autograd import RMSNormFunc

        return RMSNormFunc.apply(x, weight, residual, float(eps))
    return rms_norm_forward(x, weight, eps, residual)


def rms_norm_forward(x, weight, eps=1e-6, residual=None):
    """rms_norm without autograd (inputs are read as they are)."""
    x, weight, residual = _detach(x), _detach(weight), _detach(residual) if residual is not None else None
    width = x.shape[-1]
    y = _arrays.empty_like_kind(x, tuple(x.shape))
    vw = _arrays.view("weight", weight)
    vy = _arrays.view("y", _arrays.rows_2d("y", y, width))
    lib = _lib.library()
    with _arrays.default_stream_scope(x):
        if residual is None:
            vx = _arrays.view("x", _arrays.rows_2d("x", x, width))
            _lib.check(lib.flashc_rmsnorm(vx.ref, vw.ref, float(eps), vy.ref))
            return y
        h = _arrays.copy_of(x)
        vh = _arrays.view("x", _arrays.rows_2d("x", h, width))
        vr = _arrays.view("residual", _arrays.rows_2d("residual", residual, width))
        _lib.check(lib.flashc_rmsnorm_residual(vh.ref, vr.ref, vw.ref, float(eps), vy.ref))
    return y, h


def rms_norm_backward(dy, x, weight, eps=1e-6, dresidual=None):
    """Gradients of y = rms_norm(x) * weight: (dx, dweight), dx = ... + dresidual when given
    (the gradient arriving at x itself, e.g. at the new residual stream h). x is the normalised
    input (h for the residual variant)."""
    dy, x, weight = _detach(dy), _detach(x), _detach(weight)
    width = x.shape[-1]
    dx = _arrays.empty_like_kind(x, tuple(x.shape))
    dw = _arrays.empty_like_kind(weight, tuple(weight.shape))
    views = [
        _arrays.view("x", _arrays.rows_2d("x", x, width)),
        _arrays.view("weight", weight),
        _arrays.view("dy", _arrays.rows_2d("dy", dy, width)),
    ]
    vres = None
    if dresidual is not None:
        vres = _arrays.view("dresidual", _arrays.rows_2d("dresidual", _detach(dresidual), width))
    vdx = _arrays.view("dx", _arrays.rows_2d("dx", dx, width))
    vdw = _arrays.view("dweight", dw)
    with _arrays.default_stream_scope(x):
        _lib.check(
            _lib.library().flashc_rmsnorm_bwd(
                views[0].ref, views[1].ref, views[2].ref, vres.ref if vres else None,
                float(eps), vdx.ref, vdw.ref,
            )
        )
    return dx, dw


# ---- SwiGLU --------------------------------------------------------------------------------


def swiglu(gate_up):
    """SwiGLU on the fused gate|up projection: gate_up (..., 2*I) -> out (..., I),
    out = silu(gate) * up with gate = gate_up[..., :I], up = gate_up[..., I:],
    silu(g) = g / (1 + exp(-g)). torch autograd through flashc_swiglu_bwd."""
    _arrays.kind_of("gate_up", gate_up)
    if gate_up.ndim == 0:
        raise ValueError("flashc: gate_up is a scalar; expected (..., 2*I)")
    if _needs_grad(gate_up):
        from ._autograd import SwiGLUFunc

        return SwiGLUFunc.apply(gate_up)
    return swiglu_forward(gate_up)


def swiglu_forward(gate_up):
    gate_up = _detach(gate_up)
    width = gate_up.shape[-1]
    # An odd width is the library's to refuse (with its message); max(.., 1) keeps out a
    # valid array so the call reaches that check.
    out = _arrays.empty_like_kind(gate_up, tuple(gate_up.shape[:-1]) + (max(width // 2, 1),))
    vg = _arrays.view("gate_up", _arrays.rows_2d("gate_up", gate_up, width))
    vo = _arrays.view("out", _arrays.rows_2d("out", out, out.shape[-1]))
    with _arrays.default_stream_scope(gate_up):
        _lib.check(_lib.library().flashc_swiglu(vg.ref, vo.ref))
    return out


def swiglu_backward(dout, gate_up):
    """d gate_up (..., 2*I) of out = swiglu(gate_up) given dout (..., I)."""
    dout, gate_up = _detach(dout), _detach(gate_up)
    width = gate_up.shape[-1]
    dgu = _arrays.empty_like_kind(gate_up, tuple(gate_up.shape))
    vg = _arrays.view("gate_up", _arrays.rows_2d("gate_up", gate_up, width))
    vo = _arrays.view("dout", _arrays.rows_2d("dout", dout, width // 2))
    vd = _arrays.view("dgate_up", _arrays.rows_2d("dgate_up", dgu, width))
    with _arrays.default_stream_scope(gate_up):
        _lib.check(_lib.library().flashc_swiglu_bwd(vg.ref, vo.ref, vd.ref))
    return dgu


# ---- rotary embedding ----------------------------------------------------------------------


def apply_rotary_emb(x, cos, sin, interleaved=False, inplace=False, seqlen_offsets=0,
                     cu_seqlens=None, max_seqlen=None):
    """flash_attn.layers.rotary.apply_rotary_emb:
    x (batch, seqlen, nheads, headdim), or (total_seqlen, nheads, headdim) with cu_seqlens;
    cos, sin (seqlen_rotary, rotary_dim / 2); the first rotary_dim = 2 * cos.shape[-1]
    features of every head are rotated, the rest copied. interleaved: GPT-J pairs (x[2i],
    x[2i+1]), else GPT-NeoX halves (x[i], x[i + rotary_dim/2]). seqlen_offsets: an int or a
    (batch,) integer array: token s of sequence b sits at position s + seqlen_offsets[b], which
    must be < seqlen_rotary. inplace: x itself is rotated and returned. cos and sin are used as
    float32 (widened when given in x's 16-bit dtype). max_seqlen is accepted and not needed.
    torch autograd: the gradient of x is the rotation by -angle (flashc_rope_bwd); cos and sin
    get none (as in flash-attn)."""
    _arrays.common_kind({"x": x, "cos": cos, "sin": sin})
    if _needs_grad(x):
        from ._autograd import RotaryFunc

        return RotaryFunc.apply(x, cos, sin, bool(interleaved), bool(inplace), seqlen_offsets,
                                cu_seqlens)
    return rotary_forward(x, cos, sin, interleaved, inplace, seqlen_offsets, cu_seqlens)


def _as_tables(t):
    t = _detach(t)
    if isinstance(t, np.ndarray):
        return np.ascontiguousarray(t, dtype=np.float32)
    return t.float().contiguous()


def _positions(x, seqlen_offsets, cu_seqlens):
    """(positions array or None, pos_offset, B, S) for the library's (B, S) token grid."""
    torch = _arrays._torch()
    is_np = isinstance(x, np.ndarray)
    if cu_seqlens is not None:
        total = x.shape[0]
        cu = np.asarray(cu_seqlens, dtype=np.int64) if is_np else cu_seqlens.to(torch.int64)
        t = np.arange(total) if is_np else torch.arange(total, device=x.device)
        seq = (np.searchsorted(cu[1:], t, side="right") if is_np
               else torch.searchsorted(cu[1:].contiguous(), t, right=True))
        pos = t - cu[seq]
        if isinstance(seqlen_offsets, int):
            pos = pos + seqlen_offsets
        else:
            off = np.asarray(seqlen_offsets) if is_np else seqlen_offsets.to(x.device)
            pos = pos + off[seq]
        pos = pos.astype(np.int32) if is_np else pos.to(torch.int32).contiguous()
        return pos, 0, 1, total
    B, S = x.shape[0], x.shape[1]
    if isinstance(seqlen_offsets, int):
        return None, int(seqlen_offsets), B, S
    if is_np:
        off = np.asarray(seqlen_offsets, dtype=np.int64).reshape(B, 1)
        return (np.arange(S)[None, :] + off).astype(np.int32), 0, B, S
    off = seqlen_offsets.to(device=x.device, dtype=torch.int64).reshape(B, 1)
    return (torch.arange(S, device=x.device)[None, :] + off).to(torch.int32).contiguous(), 0, B, S


def rotary_forward(x, cos, sin, interleaved=False, inplace=False, seqlen_offsets=0,
                   cu_seqlens=None, inverse=False):
    """apply_rotary_emb without autograd; inverse=True rotates by -angle (the backward)."""
    x = _detach(x)
    if cu_seqlens is None and x.ndim != 4:
        raise ValueError(f"flashc: x has shape {tuple(x.shape)}; expected (batch, seqlen, nheads, headdim)")
    if cu_seqlens is not None and x.ndim != 3:
        raise ValueError(f"flashc: with cu_seqlens x must be (total_seqlen, nheads, headdim), not {tuple(x.shape)}")
    cos_t, sin_t = _as_tables(cos), _as_tables(sin)
    out = x if inplace else _arrays.copy_of(x)
    pos, offset, B, S = _positions(out, seqlen_offsets, cu_seqlens)
    view4 = out.reshape(B, S, out.shape[-2], out.shape[-1])
    p = _lib.new_rope_params()
    p.style = _lib.ROPE_GPTJ if interleaved else _lib.ROPE_NEOX
    p.rotary_dim = 2 * cos_t.shape[-1]
    p.pos_offset = offset
    if pos is not None:
        p.positions = pos.ctypes.data if isinstance(pos, np.ndarray) else pos.data_ptr()
    vq = _arrays.view("x", view4)
    vc, vs = _arrays.view("cos", cos_t), _arrays.view("sin", sin_t)
    fn = _lib.library().flashc_rope_bwd if inverse else _lib.library().flashc_rope
    with _arrays.device_scope(out) as stream:
        p.cuda_stream = stream
        _lib.check(fn(ctypes.byref(p), vq.ref, None, vc.ref, vs.ref))
    if vq.owner is not view4:
        out[...] = vq.owner.reshape(out.shape)  # numpy copied an inexpressible view: write back
    return out
