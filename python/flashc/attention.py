"""Attention with flash-attn's Python API, on numpy arrays and torch tensors.

Layouts (flash-attn's): q (batch, seqlen_q, nheads, headdim), k (batch, seqlen_k, nheads_k,
headdim), v (batch, seqlen_k, nheads_k, headdim_v) with nheads % nheads_k == 0 (GQA; nheads_k ==
1 is MQA); out (batch, seqlen_q, nheads, headdim_v); softmax_lse (batch, nheads, seqlen_q)
float32, natural log. Varlen: q (total_q, nheads, headdim), k/v (total_k, nheads_k, ...), int32
cu_seqlens (batch + 1), softmax_lse (nheads, total_q). Causal masks and windows are aligned
bottom-right per sequence: query i sits at key position a_i = i + seqlen_k - seqlen_q and sees
keys [a_i - window_size[0], a_i + window_size[1]] (-1: unbounded; causal: right = 0). softcap
> 0 caps the scores to softcap * tanh(s / softcap); alibi_slopes (nheads) or (batch, nheads)
float32 subtract slope * |a_i - j|. A query row that sees no key gets out = 0 and lse = -inf
(FlashAttention-3's convention; flash-attn 2 stores +inf).
"""

from __future__ import annotations

import ctypes
from typing import Optional

import numpy as np

from . import _arrays, _lib


def _reject_unsupported(dropout_p, *_unused) -> None:
    """Options flashc does not implement are refused by name, never ignored. (window_size,
    softcap and alibi_slopes are served by the library: a backend that cannot serve one for a
    given problem refuses it with NotImplementedError naming it.)"""
    if dropout_p != 0.0:
        raise NotImplementedError(
            f"flashc: dropout_p={dropout_p} is not supported (no attention dropout); pass 0.0"
        )


class Mods:
    """The score modifiers and mask of a call: window_size (left, right), softcap, alibi_slopes
    (an array of q's kind, float32 (nheads) or (batch, nheads), or None)."""

    __slots__ = ("window_size", "softcap", "alibi_slopes")

    def __init__(self, window_size=(-1, -1), softcap=0.0, alibi_slopes=None):
        ws = tuple(window_size)
        if len(ws) != 2:
            raise ValueError(f"flashc: window_size={window_size!r}; expected (left, right)")
        self.window_size = (int(ws[0]), int(ws[1]))
        self.softcap = float(softcap)
        self.alibi_slopes = alibi_slopes


_NO_MODS = Mods()


def _params(softmax_scale: Optional[float], causal: bool, stream, mods: Mods = _NO_MODS,
            deterministic=False):
    """The C params; the alibi view is kept alive on the struct (p._keep) for the call."""
    p = _lib.new_attn_params()
    if softmax_scale is not None:
        p.has_softmax_scale = 1
        p.softmax_scale = float(softmax_scale)
    p.causal = 1 if causal else 0
    p.cuda_stream = stream
    p.deterministic = 1 if deterministic else 0
    p.window_left, p.window_right = mods.window_size
    p.softcap = mods.softcap
    p._keep = None
    if mods.alibi_slopes is not None:
        va = _arrays.view("alibi_slopes", mods.alibi_slopes)
        p.alibi_slopes = ctypes.addressof(va.c)
        p._keep = va
    return p


def _rank(varlen) -> int:
    """q, k, v, out and dout are 4-d (batch, seqlen, nheads, headdim) in the dense calls and 3-d
    (total_tokens, nheads, headdim) in the varlen ones (varlen: None, or the tuple
    (cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k))."""
    return 4 if varlen is None else 3


_RANK_LAYOUTS = {4: "(batch, seqlen, nheads, headdim)", 3: "(total_tokens, nheads, headdim)"}


def _check_rank(named: dict, ndim: int = 4) -> None:
    for name, x in named.items():
        if x.ndim != ndim:
            raise ValueError(
                f"flashc: {name} has shape {tuple(x.shape)}; expected {ndim} dimensions "
                f"{_RANK_LAYOUTS[ndim]}"
            )


def _out_shape(q, v) -> tuple:
    return tuple(q.shape[:-1]) + (v.shape[-1],)


def _lse_shape(q) -> tuple:
    """(batch, nheads, seqlen_q) for a dense q; (nheads, total_q) for a varlen q."""
    if q.ndim == 3:
        return (q.shape[1], q.shape[0])
    b, sq, hq, _ = q.shape
    return (b, hq, sq)


def _paged(varlen) -> bool:
    """A paged varlen call: the varlen tuple's fifth entry, block_table, is given (k and v are
    then paged caches (num_blocks, page_block_size, nheads_k, headdim))."""
    return varlen is not None and len(varlen) > 4 and varlen[4] is not None


def _new_out_lse(q, k, v, varlen):
    """out (q's layout with v's head dim) and float32 softmax_lse, new arrays like q, once the
    ranks of q, k, v are checked."""
    _check_rank({"q": q}, _rank(varlen))
    _check_rank({"k": k, "v": v}, 4 if _paged(varlen) else _rank(varlen))
    out = _arrays.empty_like_kind(q, _out_shape(q, v))
    lse = _arrays.empty_like_kind(q, _lse_shape(q), "float32")
    return out, lse


def _varlen_struct(cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, block_table=None, *,
                   like):
    """The C flashc_varlen and the views it points to (keep them alive for the call)."""
    cq = _arrays.int32_index("cu_seqlens_q", cu_seqlens_q, like)
    ck = _arrays.int32_index("cu_seqlens_k", cu_seqlens_k, like)
    vcq, vck = _arrays.view("cu_seqlens_q", cq), _arrays.view("cu_seqlens_k", ck)
    vl = _lib.new_varlen()
    vl.cu_seqlens_q = ctypes.pointer(vcq.c)
    vl.cu_seqlens_k = ctypes.pointer(vck.c)
    vl.max_seqlen_q = int(max_seqlen_q)
    vl.max_seqlen_k = int(max_seqlen_k)
    keep = (vcq, vck)
    if block_table is not None:
        vbt = _arrays.view("block_table", _arrays.int32_index("block_table", block_table, like))
        vl.block_table = ctypes.pointer(vbt.c)
        keep += (vbt,)
    return vl, keep


def _varlen_args(varlen, like):
    """(the C arguments that follow params, what they point to): none for a dense call, the
    flashc_varlen* for a varlen one; the second must stay alive until the call returns."""
    if varlen is None:
        return (), None
    vl, keep = _varlen_struct(*varlen, like=like)
    return (ctypes.byref(vl),), (vl, keep)


def _forward(q, k, v, varlen, softmax_scale, causal, mods: Mods):
    """(out, softmax_lse) by flashc_attn_fwd (varlen None) or flashc_attn_varlen_fwd; no
    autograd."""
    _arrays.common_kind({"q": q, "k": k, "v": v, "alibi_slopes": mods.alibi_slopes})
    out, lse = _new_out_lse(q, k, v, varlen)
    if _needs_pitch(q, v) and q.shape[-1] != v.shape[-1] and not _paged(varlen):
        # the CUDA forward's Dk != Dv routes (the sm90 kernels, the prefill kernel's vectorised
        # mods instance) load 16-byte chunks of 16-byte aligned rows; other rows are served too,
        # element by element and more slowly (D == Dv keeps that path): q, k, v and out go
        # through rows pitched to 16 bytes (not a paged call's: k and v are its cache pages)
        q, k, v = (_pitched(x, True) for x in (q, k, v))
        out = _pitched(out, False)
    vo, vl = _arrays.view("out", out), _arrays.view("softmax_lse", lse)
    head, keep = _varlen_args(varlen, q)
    fn = "flashc_attn_fwd" if varlen is None else "flashc_attn_varlen_fwd"
    lib = _lib.library()
    with _arrays.device_scope(q) as stream:
        params = _params(softmax_scale, causal, stream, mods)
        _call_with_layout_retry(
            lambda x: getattr(lib, fn)(params, *head, x["q"], x["k"], x["v"], vo.ref, vl.ref, None),
            {"q": q, "k": k, "v": v},
        )
    del keep
    return out, lse


def attention_forward(q, k, v, softmax_scale=None, causal=False, mods: Mods = _NO_MODS):
    """(out, softmax_lse) by flashc_attn_fwd; no autograd. out (batch, seqlen_q, nheads,
    headdim_v) has q's dtype and device and is contiguous (on CUDA with headdim != headdim_v and
    one of them not a multiple of 8: a view of rows pitched to 16 bytes, as flash-attn returns
    its padded head dims); lse is float32 (batch, nheads, seqlen_q)."""
    return _forward(q, k, v, None, softmax_scale, causal, mods)


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
    out, lse = _new_out_lse(q, k, v, None)
    vq, vk, vv = _arrays.view("q", q), _arrays.view("k", k), _arrays.view("v", v)
    vo, vl = _arrays.view("out", out), _arrays.view("softmax_lse", lse)
    lib = _lib.library()
    with _arrays.device_scope(q) as stream:
        params = _params(softmax_scale, causal, stream)
        st = lib.flashc_attn_fwd_supported(params, vq.ref, vk.ref, vv.ref, vo.ref, vl.ref)
    return st == _lib.OK


def _needs_pitch(q, v) -> bool:
    """torch CUDA tensors with a head dim that is not a multiple of 8 (rows not 16-byte aligned
    in a packed layout)."""
    return _arrays.is_torch(q) and q.is_cuda and (q.shape[-1] % 8 != 0 or v.shape[-1] % 8 != 0)


def _pitched(x, copy: bool):
    """A view of the first x.shape[-1] columns of a new torch tensor whose rows are padded to a
    multiple of 8 elements (16 bytes in bf16/fp16), holding x's values (copy) or nothing."""
    torch = _arrays._torch()
    w = (x.shape[-1] + 7) // 8 * 8
    buf = torch.empty((*x.shape[:-1], w), dtype=x.dtype, device=x.device)
    view = buf[..., : x.shape[-1]]
    if copy:
        view.copy_(x)
    return view


def _backward(dout, q, k, v, out, softmax_lse, varlen, softmax_scale, causal, mods: Mods,
              deterministic):
    """(dq, dk, dv) by flashc_attn_bwd (varlen None) or flashc_attn_varlen_bwd."""
    if _paged(varlen):
        raise NotImplementedError(
            "flashc: a paged varlen call (block_table) is forward only: no gradient flows into "
            "a paged KV cache (flash-attn has none either)"
        )
    named = {"dout": dout, "q": q, "k": k, "v": v, "out": out, "softmax_lse": softmax_lse}
    _arrays.common_kind(dict(named, alibi_slopes=mods.alibi_slopes))
    _check_rank({"dout": dout, "q": q, "k": k, "v": v, "out": out}, _rank(varlen))
    # The CUDA backward loads 16-byte chunks of rows that start on 16-byte boundaries: a head
    # dim that is not a multiple of 8 goes in and out through rows padded to one (as
    # flash-attn's own wrapper pads its head dims to a multiple of 8); the gradients are views
    # of their first headdim columns.
    if _needs_pitch(q, v):
        named = {n: x if n == "softmax_lse" else _pitched(x, True) for n, x in named.items()}
        dq, dk, dv = (_pitched(x, False) for x in (q, k, v))
    else:
        dq = _arrays.empty_like_kind(q, tuple(q.shape))
        dk = _arrays.empty_like_kind(k, tuple(k.shape))
        dv = _arrays.empty_like_kind(v, tuple(v.shape))
    vdq, vdk, vdv = _arrays.view("dq", dq), _arrays.view("dk", dk), _arrays.view("dv", dv)
    head, keep = _varlen_args(varlen, q)
    fn = "flashc_attn_bwd" if varlen is None else "flashc_attn_varlen_bwd"
    lib = _lib.library()
    with _arrays.device_scope(q) as stream:
        params = _params(softmax_scale, causal, stream, mods, deterministic)
        ws_keep = []  # the workspace tensor lives until the call has been enqueued

        def call(x):
            args = (params, *head, x["q"], x["k"], x["v"], x["out"], x["dout"], x["softmax_lse"],
                    vdq.ref, vdk.ref, vdv.ref)
            if stream is not None:
                n = ctypes.c_size_t(0)
                if (getattr(lib, fn + "_workspace_size")(*args, ctypes.byref(n)) == _lib.OK
                        and n.value):
                    torch = _arrays._torch()
                    ws = torch.empty(n.value, dtype=torch.uint8, device=q.device)
                    ws_keep.append(ws)
                    params.workspace, params.workspace_bytes = ws.data_ptr(), n.value
            return getattr(lib, fn)(*args, None)

        _call_with_layout_retry(call, named)
    del keep
    return dq, dk, dv


def flash_attn_backward(
    dout,
    q,
    k,
    v,
    out,
    softmax_lse,
    softmax_scale=None,
    causal=False,
    window_size=(-1, -1),
    softcap=0.0,
    alibi_slopes=None,
    deterministic=False,
):
    """(dq, dk, dv) by flashc_attn_bwd (FlashAttention-2 backward, recomputation from the lse).

    dout, out (batch, seqlen_q, nheads, headdim_v); q (batch, seqlen_q, nheads, headdim); k
    (batch, seqlen_k, nheads_k, headdim), v (..., headdim_v); softmax_lse (batch, nheads,
    seqlen_q) float32 as returned by the forward with the same softmax_scale, causal,
    window_size, softcap and alibi_slopes. dq/dk/dv are new contiguous arrays like q/k/v; for
    GQA, dk and dv of a KV head sum over the query heads of its group. The softcap gradient goes
    through the tanh; ALiBi slopes get none. On the CPU always deterministic; on CUDA (bf16/fp16)
    dq is summed with float atomics unless deterministic=True, which makes every gradient
    bit-identical from run to run (dk and dv always are). For torch CUDA tensors the workspace
    (flashc_attn_bwd_workspace_size bytes: the float32 dq accumulator) is a torch tensor, so
    torch's allocator caches and counts it like the framework's own kernels do."""
    mods = Mods(window_size, softcap, alibi_slopes)
    return _backward(dout, q, k, v, out, softmax_lse, None, softmax_scale, causal, mods,
                     deterministic)


def _wants_grad(*xs) -> bool:
    if not _arrays.is_torch(xs[0]):
        return False
    torch = _arrays._torch()
    return torch.is_grad_enabled() and any(x.requires_grad for x in xs)


def _attention(q, k, v, varlen, softmax_scale, causal, window_size, softcap, alibi_slopes,
               deterministic, return_attn_probs):
    """What every flash_attn_*func returns, dense (varlen None) or varlen: out, or (out,
    softmax_lse, None); through torch autograd when a tensor needs a gradient."""
    mods = Mods(window_size, softcap, alibi_slopes)
    _arrays.common_kind({"q": q, "k": k, "v": v})
    if _wants_grad(q, k, v):
        from . import _autograd  # imports torch, which the caller already has

        out, lse = _autograd.FlashAttnFunc.apply(q, k, v, varlen, softmax_scale, causal, mods,
                                                 deterministic)
    else:
        out, lse = _forward(q, k, v, varlen, softmax_scale, causal, mods)
    return (out, lse, None) if return_attn_probs else out


def _unpack(name, x, ndim, n, layout):
    """The n tensors packed in x (ndim dimensions, n at axis ndim - 3), as strided views (no
    copy); ValueError naming layout when x has another shape."""
    _arrays.kind_of(name, x)
    axis = ndim - 3
    if x.ndim != ndim or x.shape[axis] != n:
        raise ValueError(f"flashc: {name} has shape {tuple(x.shape)}; expected {layout}")
    lead = (slice(None),) * axis
    return tuple(x[lead + (i,)] for i in range(n))


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

    q (batch, seqlen_q, nheads, headdim), k (batch, seqlen_k, nheads_k, headdim), v (...,
    headdim_v). Returns out (batch, seqlen_q, nheads, headdim_v), or (out, softmax_lse, None)
    with return_attn_probs=True; softmax_lse is float32 (batch, nheads, seqlen_q). window_size,
    softcap and alibi_slopes as flash-attn (module doc). Torch tensors with requires_grad get a
    backward (flashc_attn_bwd), on the CPU and on CUDA (bf16/fp16) where the library serves it.
    deterministic=True makes the CUDA backward bit-identical from run to run (no float atomics
    in dq); the CPU backward always is. dropout_p other than 0 raises NotImplementedError."""
    _reject_unsupported(dropout_p)
    return _attention(q, k, v, None, softmax_scale, causal, window_size, softcap, alibi_slopes,
                      deterministic, return_attn_probs)


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
    _reject_unsupported(dropout_p)
    q, k, v = _unpack("qkv", qkv, 5, 3, "(batch, seqlen, 3, nheads, headdim)")
    return _attention(q, k, v, None, softmax_scale, causal, window_size, softcap, alibi_slopes,
                      deterministic, return_attn_probs)


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
    _reject_unsupported(dropout_p)
    k, v = _unpack("kv", kv, 5, 2, "(batch, seqlen_k, 2, nheads_k, headdim)")
    return _attention(q, k, v, None, softmax_scale, causal, window_size, softcap, alibi_slopes,
                      deterministic, return_attn_probs)


# ---- varlen: ragged batches ------------------------------------------------------------------


def varlen_forward(
    q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, softmax_scale=None,
    causal=False, mods: Mods = _NO_MODS,
):
    """(out, softmax_lse) by flashc_attn_varlen_fwd; no autograd. q (total_q, nheads, headdim),
    k (total_k, nheads_k, headdim), v (total_k, nheads_k, headdim_v); out (total_q, nheads,
    headdim_v), lse float32 (nheads, total_q). Rows past cu_seqlens_q[-1] get out = 0,
    lse = -inf."""
    varlen = (cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k)
    return _forward(q, k, v, varlen, softmax_scale, causal, mods)


def flash_attn_varlen_backward(
    dout, q, k, v, out, softmax_lse, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k,
    softmax_scale=None, causal=False, window_size=(-1, -1), softcap=0.0, alibi_slopes=None,
    deterministic=False,
):
    """(dq, dk, dv) by flashc_attn_varlen_bwd: tensors packed as in the varlen forward,
    softmax_lse (nheads, total_q). Rows of no sequence get zero gradients. On the CPU always
    deterministic; on CUDA (bf16/fp16, cu_seqlens on the device) as flash_attn_backward: dq
    summed with float atomics unless deterministic=True, the workspace a torch tensor."""
    mods = Mods(window_size, softcap, alibi_slopes)
    varlen = (cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k)
    return _backward(dout, q, k, v, out, softmax_lse, varlen, softmax_scale, causal, mods,
                     deterministic)


def flash_attn_varlen_func(
    q,
    k,
    v,
    cu_seqlens_q,
    cu_seqlens_k,
    max_seqlen_q,
    max_seqlen_k,
    dropout_p=0.0,
    softmax_scale=None,
    causal=False,
    window_size=(-1, -1),
    softcap=0.0,
    alibi_slopes=None,
    deterministic=False,
    return_attn_probs=False,
    block_table=None,
):
    """flash_attn.flash_attn_varlen_func: q (total_q, nheads, headdim), k (total_k, nheads_k,
    headdim), v (total_k, nheads_k, headdim_v), cu_seqlens_q/k int32 (batch + 1) (other integer
    dtypes are converted), max_seqlen_q/k ints. Returns out (total_q, nheads, headdim_v), or
    (out, softmax_lse, None) with return_attn_probs=True, softmax_lse float32 (nheads, total_q).
    Torch tensors with requires_grad get a backward (flashc_attn_varlen_bwd). block_table int32
    (batch, max_blocks): k and v are paged caches (num_blocks, page_block_size, nheads_k,
    headdim), sequence b's key j at block block_table[b][j // page_block_size] (vLLM's mixed
    prefill/decode batch); cu_seqlens_k then gives the lengths only. Forward only: a backward
    through a paged call raises NotImplementedError."""
    _reject_unsupported(dropout_p)
    varlen = (cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, block_table)
    return _attention(q, k, v, varlen, softmax_scale, causal, window_size, softcap, alibi_slopes,
                      deterministic, return_attn_probs)


def flash_attn_varlen_qkvpacked_func(
    qkv,
    cu_seqlens,
    max_seqlen,
    dropout_p=0.0,
    softmax_scale=None,
    causal=False,
    window_size=(-1, -1),
    softcap=0.0,
    alibi_slopes=None,
    deterministic=False,
    return_attn_probs=False,
):
    """flash_attn.flash_attn_varlen_qkvpacked_func: qkv (total, 3, nheads, headdim), one
    cu_seqlens (batch + 1) and max_seqlen for q and k. q, k, v are strided views into qkv (no
    copy); returns as flash_attn_varlen_func."""
    _reject_unsupported(dropout_p)
    q, k, v = _unpack("qkv", qkv, 4, 3, "(total, 3, nheads, headdim)")
    varlen = (cu_seqlens, cu_seqlens, max_seqlen, max_seqlen)
    return _attention(q, k, v, varlen, softmax_scale, causal, window_size, softcap, alibi_slopes,
                      deterministic, return_attn_probs)


def flash_attn_varlen_kvpacked_func(
    q,
    kv,
    cu_seqlens_q,
    cu_seqlens_k,
    max_seqlen_q,
    max_seqlen_k,
    dropout_p=0.0,
    softmax_scale=None,
    causal=False,
    window_size=(-1, -1),
    softcap=0.0,
    alibi_slopes=None,
    deterministic=False,
    return_attn_probs=False,
):
    """flash_attn.flash_attn_varlen_kvpacked_func: q (total_q, nheads, headdim), kv (total_k, 2,
    nheads_k, headdim). Returns as flash_attn_varlen_func."""
    _reject_unsupported(dropout_p)
    k, v = _unpack("kv", kv, 4, 2, "(total_k, 2, nheads_k, headdim)")
    varlen = (cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k)
    return _attention(q, k, v, varlen, softmax_scale, causal, window_size, softcap, alibi_slopes,
                      deterministic, return_attn_probs)


# ---- KV cache ---------------------------------------------------------------------------------


def _kvcache_rotary(q, k, cos, sin, cache_seqlens, interleaved, per_row):
    """flash_attn_with_kvcache's rotary embedding as rotated copies of q and k (see there)."""
    if cos is None or sin is None:
        raise ValueError("flashc: rotary_cos and rotary_sin go together (both or neither)")
    if k is None:
        raise ValueError("flashc: rotary_cos/rotary_sin need the new k and v (the rotary "
                         "embedding applies to the keys being appended, as in flash-attn)")
    if cache_seqlens is None:
        raise ValueError("flashc: rotary_cos/rotary_sin need cache_seqlens (the positions of "
                         "the new keys)")
    from .ops import apply_rotary_emb

    if isinstance(cache_seqlens, (int, np.integer)):
        cache_seqlens = int(cache_seqlens)
    elif isinstance(cache_seqlens, (list, tuple)):
        cache_seqlens = (np.asarray(cache_seqlens, np.int64) if isinstance(q, np.ndarray) else
                         _arrays._torch().tensor(cache_seqlens, device=q.device))
    k = apply_rotary_emb(k, cos, sin, interleaved=interleaved, seqlen_offsets=cache_seqlens)
    if per_row:
        q = apply_rotary_emb(q, cos, sin, interleaved=interleaved, seqlen_offsets=cache_seqlens)
    else:  # every query of sequence b at cache_seqlens[b]: one "token" of Sq * H heads
        b, sq, h, d = q.shape
        q = apply_rotary_emb(q.reshape(b, 1, sq * h, d), cos, sin, interleaved=interleaved,
                             seqlen_offsets=cache_seqlens).reshape(b, sq, h, d)
    return q, k


def flash_attn_with_kvcache(
    q,
    k_cache,
    v_cache,
    k=None,
    v=None,
    rotary_cos=None,
    rotary_sin=None,
    cache_seqlens=None,
    cache_batch_idx=None,
    cache_leftpad=None,
    block_table=None,
    softmax_scale=None,
    causal=False,
    window_size=(-1, -1),
    softcap=0.0,
    rotary_interleaved=True,
    alibi_slopes=None,
    num_splits=0,
    return_softmax_lse=False,
):
    """flash_attn.flash_attn_with_kvcache by flashc_attn_kvcache_fwd (forward only, no autograd).

    q (batch, seqlen_q, nheads, headdim). k_cache/v_cache (batch_cache, seqlen_cache, nheads_k,
    headdim / headdim_v), or paged (num_blocks, page_block_size, nheads_k, ...) with block_table
    int32 (batch, max_num_blocks). k, v (batch, seqlen_new, nheads_k, ...): appended in place
    into the caches at cache_seqlens before attending. cache_seqlens: an int (every sequence) or
    int32 (batch); None = the whole cache. cache_batch_idx int32 (batch): the cache row of each
    sequence (contiguous caches). num_splits: split-KV chunks (0 = the library chooses). Returns
    out (batch, seqlen_q, nheads, headdim_v), or (out, softmax_lse) with return_softmax_lse=True,
    softmax_lse float32 (batch, nheads, seqlen_q). rotary_cos/rotary_sin (seqlen_ro,
    rotary_dim / 2), with k and v and cache_seqlens, as flash-attn: the new keys are rotated
    (rotary_interleaved: GPT-J pairs, else GPT-NeoX halves) at positions cache_seqlens[b] + s
    before they are appended, and q at the same positions when causal or local, else every
    query of sequence b at cache_seqlens[b]; flashc does it as a rotation pass over copies of q
    and k before the attention call (not fused into the append; q and k are left unchanged).
    cache_leftpad int32 (batch), contiguous caches with cache_seqlens: sequence b's keys start
    at cache row cache_leftpad[b] (rows before it are padding), so it attends to rows
    [cache_leftpad[b], cache_seqlens[b] + seqlen_new), the masks aligned to those keys; k, v and
    the rotary positions still count from row 0 (as flash-attn)."""
    if rotary_cos is not None or rotary_sin is not None:
        local = window_size is not None and (window_size[0] >= 0 or window_size[1] >= 0)
        q, k = _kvcache_rotary(q, k, rotary_cos, rotary_sin, cache_seqlens, rotary_interleaved,
                               causal or local)
    if (k is None) != (v is None):
        raise ValueError("flashc: k and v go together (both or neither)")
    mods = Mods(window_size, softcap, alibi_slopes)
    named = {"q": q, "k_cache": k_cache, "v_cache": v_cache, "k": k, "v": v}
    _arrays.common_kind(dict(named, alibi_slopes=alibi_slopes))
    _check_rank({n: x for n, x in named.items() if x is not None})
    if isinstance(cache_seqlens, (int, np.integer)):
        cache_seqlens = [int(cache_seqlens)] * q.shape[0]
    idx = {}
    for name, x in (("cache_seqlens", cache_seqlens), ("cache_batch_idx", cache_batch_idx),
                    ("block_table", block_table), ("cache_leftpad", cache_leftpad)):
        if x is not None:
            idx[name] = _arrays.view(name, _arrays.int32_index(name, x, q))
    out = _arrays.empty_like_kind(q, _out_shape(q, v_cache))
    lse = _arrays.empty_like_kind(q, _lse_shape(q), "float32")
    vo, vlse = _arrays.view("out", out), _arrays.view("softmax_lse", lse)
    write = k is not None
    vkc = (_arrays.inplace_view if write else _arrays.view)("k_cache", k_cache)
    vvc = (_arrays.inplace_view if write else _arrays.view)("v_cache", v_cache)
    vq = _arrays.view("q", q)
    vk = _arrays.view("k", k) if write else None
    vv = _arrays.view("v", v) if write else None
    c = _lib.new_kv_cache()
    c.k_cache, c.v_cache = ctypes.pointer(vkc.c), ctypes.pointer(vvc.c)
    if write:
        c.k_new, c.v_new = ctypes.pointer(vk.c), ctypes.pointer(vv.c)
    for name, vw in idx.items():
        setattr(c, name, ctypes.pointer(vw.c))
    lib = _lib.library()
    with _arrays.device_scope(q) as stream:
        params = _params(softmax_scale, causal, stream, mods)
        params.num_splits = int(num_splits)
        _lib.check(lib.flashc_attn_kvcache_fwd(params, ctypes.byref(c), vq.ref, vo.ref, vlse.ref, None))
    return (out, lse) if return_softmax_lse else out
