"""torch.autograd.Function for attention; imported only when a torch tensor needs a gradient."""

from __future__ import annotations

import torch

from . import attention


class FlashAttnFunc(torch.autograd.Function):
    """out, lse = attention(q, k, v); backward by flashc_attn_bwd from the saved lse.

    lse is returned for return_attn_probs but is not differentiable (as in flash-attn). The
    backward runs where the forward ran (CPU float32, CUDA bf16/fp16); a dtype or device the
    library has no backward for raises NotImplementedError from backward, with its detail.
    deterministic is passed to the backward (bit-identical CUDA gradients). The packed variants
    hand in views of one qkv / kv tensor: torch sums the three (two) gradients into it."""

    @staticmethod
    def forward(ctx, q, k, v, softmax_scale, causal, deterministic=False):
        out, lse = attention.attention_forward(q, k, v, softmax_scale, causal)
        ctx.save_for_backward(q, k, v, out, lse)
        ctx.softmax_scale = softmax_scale
        ctx.causal = causal
        ctx.deterministic = deterministic
        ctx.mark_non_differentiable(lse)
        return out, lse

    @staticmethod
    def backward(ctx, dout, dlse):
        q, k, v, out, lse = ctx.saved_tensors
        dq, dk, dv = attention.flash_attn_backward(
            dout, q, k, v, out, lse, softmax_scale=ctx.softmax_scale, causal=ctx.causal,
            deterministic=ctx.deterministic,
        )
        return dq, dk, dv, None, None, None
