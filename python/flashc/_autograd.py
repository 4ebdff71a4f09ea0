"""torch.autograd.Function for attention and the fused ops; imported only when a torch tensor
needs a gradient."""

from __future__ import annotations

import torch

from . import attention, ops


class FlashAttnFunc(torch.autograd.Function):
    """out, lse = attention(q, k, v), dense (varlen None) or varlen (varlen = (cu_seqlens_q,
    cu_seqlens_k, max_seqlen_q, max_seqlen_k), q/k/v packed (total, nheads, headdim)); backward
    by flashc_attn_bwd / flashc_attn_varlen_bwd from the saved lse.

    lse is returned for return_attn_probs but is not differentiable (as in flash-attn), nor are
    the ALiBi slopes, cu_seqlens, max_seqlen, the scale or the modifiers. The backward runs
    where the forward ran (on CUDA tensors the CUDA backward); a dtype, device or option the
    library has no backward for raises NotImplementedError from backward, with its detail.
    deterministic is passed to the backward (bit-identical CUDA gradients). The packed variants
    hand in views of one qkv / kv tensor: torch sums the three (two) gradients into it."""

    @staticmethod
    def forward(ctx, q, k, v, varlen, softmax_scale, causal, mods, deterministic):
        out, lse = attention._forward(q, k, v, varlen, softmax_scale, causal, mods)
        ctx.save_for_backward(q, k, v, out, lse)
        ctx.varlen = varlen
        ctx.softmax_scale = softmax_scale
        ctx.causal = causal
        ctx.mods = mods
        ctx.deterministic = deterministic
        ctx.mark_non_differentiable(lse)
        return out, lse

    @staticmethod
    def backward(ctx, dout, dlse):
        q, k, v, out, lse = ctx.saved_tensors
        if ctx.varlen is not None:
            # as before the dense and varlen Functions were one: the varlen backward is handed
            # a contiguous dout, the dense one dout as it comes (the layout retry copies it only
            # when a backend refuses its strides)
            dout = dout.contiguous()
        dq, dk, dv = attention._backward(
            dout, q, k, v, out, lse, ctx.varlen, ctx.softmax_scale, ctx.causal, ctx.mods,
            ctx.deterministic,
        )
        return dq, dk, dv, None, None, None, None, None


class RMSNormFunc(torch.autograd.Function):
    """y = rms_norm(x) * w, or (y, h) with h = x + residual; backward by flashc_rmsnorm_bwd on
    the saved normalised input (x, or h), with h's own gradient as its dres."""

    @staticmethod
    def forward(ctx, x, weight, residual, eps):
        ctx.eps = eps
        ctx.has_residual = residual is not None
        if residual is None:
            y = ops.rms_norm_forward(x, weight, eps)
            ctx.save_for_backward(x, weight)
            return y
        y, h = ops.rms_norm_forward(x, weight, eps, residual)
        ctx.save_for_backward(h, weight)
        return y, h

    @staticmethod
    def backward(ctx, dy, dh=None):
        xn, weight = ctx.saved_tensors
        if dy is None:
            dy = torch.zeros_like(xn)
        dx, dw = ops.rms_norm_backward(dy.contiguous(), xn, weight, ctx.eps,
                                       dh.contiguous() if dh is not None else None)
        return dx, dw, (dx if ctx.has_residual else None), None


class SwiGLUFunc(torch.autograd.Function):
    @staticmethod
    def forward(ctx, gate_up):
        ctx.save_for_backward(gate_up)
        return ops.swiglu_forward(gate_up)

    @staticmethod
    def backward(ctx, dout):
        (gate_up,) = ctx.saved_tensors
        return ops.swiglu_backward(dout.contiguous(), gate_up)


class RotaryFunc(torch.autograd.Function):
    """apply_rotary_emb; the gradient of x is the rotation of the incoming gradient by -angle."""

    @staticmethod
    def forward(ctx, x, cos, sin, interleaved, inplace, seqlen_offsets, cu_seqlens):
        out = ops.rotary_forward(x, cos, sin, interleaved, inplace, seqlen_offsets, cu_seqlens)
        ctx.save_for_backward(cos, sin)
        ctx.args = (interleaved, seqlen_offsets, cu_seqlens)
        if inplace:  # x itself now holds the result: return that very tensor, marked dirty
            ctx.mark_dirty(x)
            return x
        return out

    @staticmethod
    def backward(ctx, dout):
        cos, sin = ctx.saved_tensors
        interleaved, seqlen_offsets, cu_seqlens = ctx.args
        dx = ops.rotary_forward(dout, cos, sin, interleaved, False, seqlen_offsets, cu_seqlens,
                                inverse=True)
        return dx, None, None, None, None, None, None
