"""Attention with flash-attn's Python API, on numpy arrays and torch tensors.

Layouts (flash-attn's): q (batch, seqlen_q, nheads, headdim), k and v (batch, seqlen_k,
nheads_k, headdim) with nheads % nheads_k == 0 (GQA; nheads_k == 1 is MQA); out like q;
softmax_lse (batch, nheads, seqlen_q) float32, natural log. Causal masking is aligned
bottom-right: query i sees key j iff j <= i + seqlen_k - seqlen_q; a query row that sees no key
(seqlen_q > seqlen_k) gets out = 0 and lse = -inf.
"""

from __future__ import annotations

import ctypes
from typing import Any, Optional, Tuple

from . import _arrays, _lib


def _reject_unsupported(dropout_p, softmax_scale, window_size, softcap, alibi_slopes) -> None:
    """Options flashc does not implement are refused by name, never ignored."""
    if dropout_p != 0.0:
        raise NotImplementedError(
            f"flashc: dropout_p={dropout_p} is not supported (no attention dropout); pass 0.0"
        )
    if tuple(window_size) != (-1, -1):
        raise NotImplementedError(
            f"flashc: window_size={tuple(window_size)} is not supported (no sliding-window "
            "attention); pass (-1, -1)"
        )
    if softcap != 0.0:
        raise NotImplementedError(f"flashc: softcap={softcap} is not supported; pass 0.0")
    if alibi_slopes is not None:
        raise NotImplementedError("flashc: alibi_slopes is not supported; pass None")


def _params(softmax_scale: Optional[float], causal: bool, stream, deterministic=False) -> _lib.AttnParams:
    p = _lib.new_attn_params()
    if softmax_scale is not None:
        p.has_softmax_scale = 1
        p.softmax_scale = float(softmax_scale)
    p.causal = 1 if causal else 0
    p.cuda_stream = stream
    p.deterministic = 1 if deterministic else 0
    return p


def _lse_shape(q) -> tuple:
    b, sq, hq, _ = q.shape
    return (b, hq, sq)


def _check_rank(named: dict) -> None:
    for name, x in named.items():
        if x.ndim != 4:
            raise ValueError(
                f"flashc: {name} has shape {tuple(x.shape)}; expected 4 dimensions "
                "(batch, seqlen, nheads, headdim)"
            )


def attention_forward(q, k, v, softmax_scale=None, causal=False) -> Tuple[Any, Any]:
    """(out, softmax_lse) by flashc_attn_fwd; no autograd. out has q's dtype and device and is
    contiguous; lse is float32 (batch, nheads, seqlen_q)."""
    _arrays.common_kind({"q": q, "k": k, "v": v})
    _check_rank({"q": q, "k": k, "v": v})
    out = _arrays.empty_like_kind(q, tuple(q.shape))
    lse = _arrays.empty_like_kind(q, _lse_shape(q), "float32")
    vo, vl = _arrays.view("out", out), _arrays.view("softmax_lse", lse)
    lib = _lib.library()
    with _arrays.device_scope(q) as stream:
        params = _params(softmax_scale, causal, stream)
        _call_with_layout_retry(
            lambda x: lib.flashc_attn_fwd(params, x["q"], x["k"], x["v"], vo.ref, vl.ref, None),
            {"q": q, "k": k, "v": v},
        )
    return out, lse


def _call_with_layout_retry(call, inputs: dict) -> None:
    """call({name: flashc_tensor*}) -> status, then raise on failure. A backend may refuse a
    valid strided layout (FLASHC_ERR_UNSUPPORTED: the CUDA backend needs a unit headdim stride
    and 16-byte aligned rows); the call is then retried once with contiguous copies of the inputs
    that are views (as flash-attn does with .contiguous()). Outputs are untouched by a refused
    call (the library's contract), so the retry starts clean."""
    views = {n: _arrays.view(n, x) for n, x in inputs.items()}
    st = call({n: vw.ref for n, vw in views.items()})
    if st == _lib.ERR_UNSUPPORTED:
        plain = {n: x if _arrays.is_plain(x) else _arrays.copy_of(x) for n, x in inputs.items()}
        if any(plain[n] is not inputs[n] for n in inputs):
            views = {n: _arrays.view(n, x) for n, x in plain.items()}
            st = call({n: vw.ref for n, vw in views.items()})
    _lib.check(st)


def attn_fwd_supported(q, k, v, softmax_scale=None, causal=False) -> bool:
    """Whether flashc_attn_fwd would accept these inputs (dtype, device, head dim, shapes), asked
    from the library without computing. When False, flashc.last_error() says why."""
    _arrays.common_kind({"q": q, "k": k, "v": v})
    _check_rank({"q": q, "k": k, "v": v})
    out = _arrays.empty_like_kind(q, tuple(q.shape))
    lse = _arrays.empty_like_kind(q, _lse_shape(q), "float32")
    vq, vk, vv = _arrays.view("q", q), _arrays.view("k", k), _arrays.view("v", v)
    vo, vl = _arrays.view("out", out), _arrays.view("softmax_lse", lse)
    lib = _lib.library()
    with _arrays.device_scope(q) as stream:
        params = _params(softmax_scale, causal, stream)
        st = lib.flashc_attn_fwd_supported(params, vq.ref, vk.ref, vv.ref, vo.ref, vl.ref)
    return st == _lib.OK


def flash_attn_backward(dout, q, k, v, out, softmax_lse, softmax_scale=None, causal=False,
                        deterministic=False):
    """(dq, dk, dv) by flashc_attn_bwd (FlashAttention-2 backward, recomputation from the lse).

    dout, q, out (batch, seqlen_q, nheads, headdim); k, v (batch, seqlen_k, nheads_k, headdim);
    softmax_lse (batch, nheads, seqlen_q) float32 as returned by the forward with the same
    softmax_scale and causal. dq/dk/dv are new contiguous arrays like q/k/v; for GQA, dk and dv
    of a KV head sum over the query heads of its group. On the CPU always deterministic; on
    CUDA (bf16/fp16) dq is summed with float atomics unless deterministic=True, which makes
    every gradient bit-identical from run to run (dk and dv always are). For torch CUDA tensors
    the workspace (flashc_attn_bwd_workspace_size bytes: the float32 dq accumulator) is a torch
    tensor, so torch's allocator caches and counts it like the framework's own kernels do."""
    named = {"dout": dout, "q": q, "k": k, "v": v, "out": out, "softmax_lse": softmax_lse}
    _arrays.common_kind(named)
    _check_rank({"dout": dout, "q": q, "k": k, "v": v, "out": out})
    dq = _arrays.empty_like_kind(q, tuple(q.shape))
    dk = _arrays.empty_like_kind(k, tuple(k.shape))
    dv = _arrays.empty_like_kind(v, tuple(v.shape))
    vdq, vdk, vdv = _arrays.view("dq", dq), _arrays.view("dk", dk), _arrays.view("dv", dv)
    lib = _lib.library()
    with _arrays.device_scope(q) as stream:
        params = _params(softmax_scale, causal, stream, deterministic)
        keep = []  # the workspace tensor lives until the call has been enqueued

        def call(x):
            args = (params, x["q"], x["k"], x["v"], x["out"], x["dout"], x["softmax_lse"],
                    vdq.ref, vdk.ref, vdv.ref)
            if stream is not None:
                n = ctypes.c_size_t(0)
                if lib.flashc_attn_bwd_workspace_size(*args, ctypes.byref(n)) == _lib.OK and n.value:
                    torch = _arrays._torch()
                    ws = torch.empty(n.value, dtype=torch.uint8, device=q.device)
                    keep.append(ws)
                    params.workspace, params.workspace_bytes = ws.data_ptr(), n.value
            return lib.flashc_attn_bwd(*args, None)

        _call_with_layout_retry(call, named)
    return dq, dk, dv


def _wants_grad(*xs) -> bool:
    if not _arrays.is_torch(xs[0]):
        return False
    torch = _arrays._torch()
    return torch.is_grad_enabled() and any(x.requires_grad for x in xs)


def _attention(q, k, v, softmax_scale, causal, deterministic=False):
    _arrays.common_kind({"q": q, "k": k, "v": v})
    if _wants_grad(q, k, v):
        from . import _autograd  # imports torch, which the caller already has

        return _autograd.FlashAttnFunc.apply(q, k, v, softmax_scale, causal, deterministic)
    return attention_forward(q, k, v, softmax_scale, causal)


def flash_attn_func(
    q,
    k,
    v,
    dropout_p=0.0,
    softmax_scale=None,
    causal=False,
    window_size=(-1, -1),
    softcap=0.0,
    alibi_slopes=None,
    deterministic=False,
    return_attn_probs=False,
):
    """flash_attn.flash_attn_func on numpy arrays or torch tensors (CPU or CUDA).

    q (batch, seqlen_q, nheads, headdim), k/v (batch, seqlen_k, nheads_k, headdim).
    Returns out (batch, seqlen_q, nheads, headdim), or (out, softmax_lse, None) with
    return_attn_probs=True; softmax_lse is float32 (batch, nheads, seqlen_q). Torch tensors
    with requires_grad get a backward (flashc_attn_bwd), on the CPU (float32) and on CUDA
    (bf16/fp16). deterministic=True makes the CUDA backward bit-identical from run to run (no
    float atomics in dq); the CPU backward always is. dropout_p, window_size, softcap and alibi_slopes other than
    their defaults raise NotImplementedError."""
    _reject_unsupported(dropout_p, softmax_scale, window_size, softcap, alibi_slopes)
    out, lse = _attention(q, k, v, softmax_scale, causal, deterministic)
    return (out, lse, None) if return_attn_probs else out


def flash_attn_qkvpacked_func(
    qkv,
    dropout_p=0.0,
    softmax_scale=None,
    causal=False,
    window_size=(-1, -1),
    softcap=0.0,
    alibi_slopes=None,
    deterministic=False,
    return_attn_probs=False,
):
    """flash_attn.flash_attn_qkvpacked_func: qkv (batch, seqlen, 3, nheads, headdim).
    q, k and v are strided views into qkv (no copy); returns as flash_attn_func."""
    _reject_unsupported(dropout_p, softmax_scale, window_size, softcap, alibi_slopes)
    _arrays.kind_of("qkv", qkv)
    if qkv.ndim != 5 or qkv.shape[2] != 3:
        raise ValueError(
            f"flashc: qkv has shape {tuple(qkv.shape)}; expected (batch, seqlen, 3, nheads, headdim)"
        )
    out, lse = _attention(qkv[:, :, 0], qkv[:, :, 1], qkv[:, :, 2], softmax_scale, causal,
                          deterministic)
    return (out, lse, None) if return_attn_probs else out


def flash_attn_kvpacked_func(
    q,
    kv,
    dropout_p=0.0,
    softmax_scale=None,
    causal=False,
    window_size=(-1, -1),
    softcap=0.0,
    alibi_slopes=None,
    deterministic=False,
    return_attn_probs=False,
):
    """flash_attn.flash_attn_kvpacked_func: q (batch, seqlen_q, nheads, headdim),
    kv (batch, seqlen_k, 2, nheads_k, headdim). Returns as flash_attn_func."""
    _reject_unsupported(dropout_p, softmax_scale, window_size, softcap, alibi_slopes)
    _arrays.kind_of("kv", kv)
    if kv.ndim != 5 or kv.shape[2] != 2:
        raise ValueError(
            f"flashc: kv has shape {tuple(kv.shape)}; expected (batch, seqlen_k, 2, nheads_k, headdim)"
        )
    out, lse = _attention(q, kv[:, :, 0], kv[:, :, 1], softmax_scale, causal, deterministic)
    return (out, lse, None) if return_attn_probs else out
