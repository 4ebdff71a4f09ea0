"""float64 numpy references for the binding tests (independent of libflashc).

Layouts as flash-attn: q (B, Sq, Hq, D), k/v (B, Sk, Hkv, D), out like q, lse (B, Hq, Sq).
Causal is bottom-right aligned: query i sees key j iff j <= i + Sk - Sq.
"""

import numpy as np


def causal_visible(sq, sk):
    """(Sq, Sk) bool: True where query i may see key j."""
    i = np.arange(sq)[:, None]
    j = np.arange(sk)[None, :]
    return j <= i + sk - sq


def _heads(k, hq):
    """k (B, S, Hkv, D) -> (B, S, Hq, D); query head h uses KV head h // (Hq // Hkv)."""
    return np.repeat(k, hq // k.shape[2], axis=2)


def key_visible(sq, sk, causal=False, window_size=(-1, -1)):
    """(Sq, Sk) bool: the key range of each query row (flash-attn's window_size, bottom-right:
    row i sits at a = i + Sk - Sq and sees keys [a - left, a + right]; -1 unbounded; causal
    sets right = 0)."""
    i = np.arange(sq)[:, None]
    j = np.arange(sk)[None, :]
    a = i + sk - sq
    left, right = window_size
    if causal:
        right = 0
    vis = np.ones((sq, sk), bool)
    if left >= 0:
        vis &= j >= a - left
    if right >= 0:
        vis &= j <= a + right
    return vis


def _scores(q, k, scale, causal, window_size, softcap, alibi_slopes):
    """(raw u, modified s) (B, Hq, Sq, Sk) in float64; s is -inf outside the key ranges."""
    q = np.asarray(q, np.float64)
    kh = _heads(np.asarray(k, np.float64), q.shape[2])
    u = np.einsum("bqhd,bkhd->bhqk", q, kh) * scale
    s = softcap * np.tanh(u / softcap) if softcap > 0 else u.copy()
    b, sq, hq, _ = q.shape
    sk = kh.shape[1]
    if alibi_slopes is not None:
        sl = np.asarray(alibi_slopes, np.float64)
        sl = np.broadcast_to(sl, (b, hq)) if sl.ndim == 1 else sl
        a = np.arange(sq)[:, None] + sk - sq
        dist = np.abs(a - np.arange(sk)[None, :]).astype(np.float64)
        s = s - sl[:, :, None, None] * dist[None, None]
    s = np.where(key_visible(sq, sk, causal, window_size), s, -np.inf)
    return u, s


def attn_probs(q, k, scale, causal, window_size=(-1, -1), softcap=0.0, alibi_slopes=None):
    """P (B, Hq, Sq, Sk) in float64, rows with no visible key all zero; and lse (B, Hq, Sq)."""
    _, s = _scores(q, k, scale, causal, window_size, softcap, alibi_slopes)
    m = s.max(axis=-1, keepdims=True)
    m_safe = np.where(np.isfinite(m), m, 0.0)
    p = np.exp(s - m_safe)
    l = p.sum(axis=-1, keepdims=True)
    with np.errstate(invalid="ignore", divide="ignore"):
        p = np.where(l > 0, p / np.where(l > 0, l, 1.0), 0.0)
        lse = np.where(l[..., 0] > 0, m_safe[..., 0] + np.log(l[..., 0]), -np.inf)
    return p, lse


def attn_fwd(q, k, v, scale=None, causal=False, window_size=(-1, -1), softcap=0.0,
             alibi_slopes=None):
    """(out (B, Sq, Hq, Dv), lse (B, Hq, Sq)) in float64."""
    scale = 1.0 / np.sqrt(q.shape[-1]) if scale is None else scale
    p, lse = attn_probs(q, k, scale, causal, window_size, softcap, alibi_slopes)
    vh = _heads(np.asarray(v, np.float64), q.shape[2])
    return np.einsum("bhqk,bkhd->bqhd", p, vh), lse


def attn_bwd(dout, q, k, v, scale=None, causal=False, window_size=(-1, -1), softcap=0.0,
             alibi_slopes=None):
    """(dq, dk, dv) of L = sum(out * dout), analytic, float64; GQA reduced over each group; the
    softcap gradient through the tanh (ALiBi slopes are constants)."""
    scale = 1.0 / np.sqrt(q.shape[-1]) if scale is None else scale
    q64, k64, v64, do = (np.asarray(a, np.float64) for a in (q, k, v, dout))
    hq, hkv = q.shape[2], k.shape[2]
    p, _ = attn_probs(q64, k64, scale, causal, window_size, softcap, alibi_slopes)
    kh, vh = _heads(k64, hq), _heads(v64, hq)
    out = np.einsum("bhqk,bkhd->bqhd", p, vh)
    dvh = np.einsum("bhqk,bqhd->bkhd", p, do)
    dp = np.einsum("bqhd,bkhd->bhqk", do, vh)
    delta = np.einsum("bqhd,bqhd->bhq", do, out)[..., None]
    ds = p * (dp - delta)
    if softcap > 0:
        u, _ = _scores(q64, k64, scale, causal, window_size, softcap, alibi_slopes)
        ds = ds * (1.0 - np.tanh(u / softcap) ** 2)
    dq = scale * np.einsum("bhqk,bkhd->bqhd", ds, kh)
    dkh = scale * np.einsum("bhqk,bqhd->bkhd", ds, q64)
    b, sk = k.shape[0], k.shape[1]
    group = hq // hkv
    dk = dkh.reshape(b, sk, hkv, group, k.shape[3]).sum(axis=3)
    dv = dvh.reshape(b, sk, hkv, group, v.shape[3]).sum(axis=3)
    return dq, dk, dv


def finite_difference_grads(loss, args, h=1e-6):
    """Central differences of the scalar loss(*args) in every element of each float64 array of
    args: a list of arrays like args, to check the analytic gradients above against."""
    grads = []
    for which in range(len(args)):
        num = np.zeros_like(args[which])
        for idx in np.ndindex(args[which].shape):
            plus = [a.copy() for a in args]
            minus = [a.copy() for a in args]
            plus[which][idx] += h
            minus[which][idx] -= h
            num[idx] = (loss(*plus) - loss(*minus)) / (2 * h)
        grads.append(num)
    return grads


def _seq_slopes(alibi_slopes, b):
    if alibi_slopes is None:
        return None
    sl = np.asarray(alibi_slopes, np.float64)
    return sl[b] if sl.ndim == 2 else sl


def attn_varlen_fwd(q, k, v, cu_q, cu_k, scale=None, **mods):
    """Varlen by running each sequence alone: q (Tq, Hq, D), k/v (Tk, Hkv, .), cu int (B + 1);
    out (Tq, Hq, Dv) (0 past cu_q[-1]), lse (Hq, Tq) (-inf where no key is seen)."""
    cu_q, cu_k = np.asarray(cu_q), np.asarray(cu_k)
    alibi = mods.pop("alibi_slopes", None)
    out = np.zeros(q.shape[:-1] + (v.shape[-1],))
    lse = np.full((q.shape[1], q.shape[0]), -np.inf)
    scale = 1.0 / np.sqrt(q.shape[-1]) if scale is None else scale
    for b in range(len(cu_q) - 1):
        q0, q1, k0, k1 = cu_q[b], cu_q[b + 1], cu_k[b], cu_k[b + 1]
        if q1 == q0:
            continue
        if k1 == k0:
            continue
        o, l = attn_fwd(q[None, q0:q1], k[None, k0:k1], v[None, k0:k1], scale,
                        alibi_slopes=_seq_slopes(alibi, b), **mods)
        out[q0:q1], lse[:, q0:q1] = o[0], l[0]
    return out, lse


def attn_varlen_bwd(dout, q, k, v, cu_q, cu_k, scale=None, **mods):
    """(dq, dk, dv) of the varlen layout, each sequence alone; zero rows outside sequences."""
    cu_q, cu_k = np.asarray(cu_q), np.asarray(cu_k)
    alibi = mods.pop("alibi_slopes", None)
    dq, dk, dv = (np.zeros(a.shape) for a in (q, k, v))
    scale = 1.0 / np.sqrt(q.shape[-1]) if scale is None else scale
    for b in range(len(cu_q) - 1):
        q0, q1, k0, k1 = cu_q[b], cu_q[b + 1], cu_k[b], cu_k[b + 1]
        if q1 == q0 or k1 == k0:
            continue
        g = attn_bwd(dout[None, q0:q1], q[None, q0:q1], k[None, k0:k1], v[None, k0:k1], scale,
                     alibi_slopes=_seq_slopes(alibi, b), **mods)
        dq[q0:q1], dk[k0:k1], dv[k0:k1] = g[0][0], g[1][0], g[2][0]
    return dq, dk, dv


def kvcache_fwd(q, k_cache, v_cache, k=None, v=None, cache_seqlens=None, cache_batch_idx=None,
                block_table=None, scale=None, cache_leftpad=None, **mods):
    """flash_attn_with_kvcache's semantics in float64 on copies: returns (out (B, Sq, Hq, Dv),
    lse (B, Hq, Sq), k_cache', v_cache') with k/v appended at cache_seqlens; each sequence
    attends to its first cache_seqlens[b] + S_new keys (contiguous row cache_batch_idx[b], or
    the pages of block_table[b]), less the first cache_leftpad[b] (contiguous), which are
    padding: its keys are rows [cache_leftpad[b], cache_seqlens[b] + S_new)."""
    kc, vc = np.array(k_cache, np.float64), np.array(v_cache, np.float64)
    b_, sq, hq, _ = q.shape
    s_new = 0 if k is None else k.shape[1]
    if cache_seqlens is None:
        cache_seqlens = [kc.shape[1]] * b_
    cache_seqlens = np.broadcast_to(np.asarray(cache_seqlens), (b_,))
    out = np.zeros((b_, sq, hq, vc.shape[-1]))
    lse = np.zeros((b_, hq, sq))
    scale = 1.0 / np.sqrt(q.shape[-1]) if scale is None else scale
    alibi = mods.pop("alibi_slopes", None)
    for b in range(b_):
        n = int(cache_seqlens[b]) + s_new
        if block_table is not None:
            ps = kc.shape[1]
            rows = [(int(block_table[b][j // ps]), j % ps) for j in range(n)]
        else:
            row = b if cache_batch_idx is None else int(cache_batch_idx[b])
            rows = [(row, j) for j in range(n)]
        for t in range(s_new):
            r = rows[int(cache_seqlens[b]) + t]
            kc[r], vc[r] = k[b, t], v[b, t]
        if cache_leftpad is not None:
            rows = rows[int(cache_leftpad[b]):]
            n = len(rows)
        kb = np.stack([kc[r] for r in rows])[None] if n else np.zeros((1, 0) + kc.shape[2:])
        vb = np.stack([vc[r] for r in rows])[None] if n else np.zeros((1, 0) + vc.shape[2:])
        if n == 0:
            lse[b] = -np.inf
            continue
        o, l = attn_fwd(q[b:b + 1], kb, vb, scale, alibi_slopes=_seq_slopes(alibi, b), **mods)
        out[b], lse[b] = o[0], l[0]
    return out, lse, kc, vc


def rms_norm(x, w, eps):
    x = np.asarray(x, np.float64)
    rstd = 1.0 / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps)
    return x * rstd * np.asarray(w, np.float64)


def swiglu(gu):
    gu = np.asarray(gu, np.float64)
    i = gu.shape[-1] // 2
    g, u = gu[..., :i], gu[..., i:]
    return g / (1.0 + np.exp(-g)) * u


def round_to(x, dtype):
    """x rounded to "float16" or "bfloat16" (round to nearest even), returned as float64."""
    x = np.asarray(x, np.float64)
    if dtype == "float16":
        return x.astype(np.float16).astype(np.float64)
    assert dtype == "bfloat16", dtype
    u = x.astype(np.float32).view(np.uint32).astype(np.uint64)
    u = (u + 0x7FFF + ((u >> 16) & 1)) & 0xFFFF0000
    return u.astype(np.uint32).view(np.float32).astype(np.float64)


def attn_fwd_naive_lowp(q, k, v, dtype, scale=None, causal=False):
    """What an unfused framework computes in a 16-bit dtype: S, P and O each stored (rounded)
    in dtype, arithmetic exact in between. The yardstick of the low-precision tests: flashc's
    error vs attn_fwd must be <= 2x this one's."""
    scale = 1.0 / np.sqrt(q.shape[-1]) if scale is None else scale
    q64, k64, v64 = (round_to(a, dtype) for a in (q, k, v))
    hq = q.shape[2]
    kh, vh = _heads(k64, hq), _heads(v64, hq)
    s = round_to(np.einsum("bqhd,bkhd->bhqk", q64, kh) * scale, dtype)
    if causal:
        s = np.where(causal_visible(q.shape[1], kh.shape[1]), s, -np.inf)
    m = s.max(axis=-1, keepdims=True)
    p = np.exp(s - np.where(np.isfinite(m), m, 0.0))
    l = p.sum(axis=-1, keepdims=True)
    p = round_to(np.where(l > 0, p / np.where(l > 0, l, 1.0), 0.0), dtype)
    return round_to(np.einsum("bhqk,bkhd->bqhd", p, vh), dtype)
