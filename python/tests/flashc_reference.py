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


def attn_probs(q, k, scale, causal):
    """P (B, Hq, Sq, Sk) in float64, rows with no visible key all zero; and lse (B, Hq, Sq)."""
    q = np.asarray(q, np.float64)
    kh = _heads(np.asarray(k, np.float64), q.shape[2])
    s = np.einsum("bqhd,bkhd->bhqk", q, kh) * scale
    if causal:
        s = np.where(causal_visible(q.shape[1], kh.shape[1]), s, -np.inf)
    m = s.max(axis=-1, keepdims=True)
    m_safe = np.where(np.isfinite(m), m, 0.0)
    p = np.exp(s - m_safe)
    l = p.sum(axis=-1, keepdims=True)
    with np.errstate(invalid="ignore", divide="ignore"):
        p = np.where(l > 0, p / np.where(l > 0, l, 1.0), 0.0)
        lse = np.where(l[..., 0] > 0, m_safe[..., 0] + np.log(l[..., 0]), -np.inf)
    return p, lse


def attn_fwd(q, k, v, scale=None, causal=False):
    """(out (B, Sq, Hq, D), lse (B, Hq, Sq)) in float64."""
    scale = 1.0 / np.sqrt(q.shape[-1]) if scale is None else scale
    p, lse = attn_probs(q, k, scale, causal)
    vh = _heads(np.asarray(v, np.float64), q.shape[2])
    return np.einsum("bhqk,bkhd->bqhd", p, vh), lse


def attn_bwd(dout, q, k, v, scale=None, causal=False):
    """(dq, dk, dv) of L = sum(out * dout), analytic, float64; GQA reduced over each group."""
    scale = 1.0 / np.sqrt(q.shape[-1]) if scale is None else scale
    q64, k64, v64, do = (np.asarray(a, np.float64) for a in (q, k, v, dout))
    hq, hkv = q.shape[2], k.shape[2]
    p, _ = attn_probs(q64, k64, scale, causal)
    kh, vh = _heads(k64, hq), _heads(v64, hq)
    out = np.einsum("bhqk,bkhd->bqhd", p, vh)
    dvh = np.einsum("bhqk,bqhd->bkhd", p, do)
    dp = np.einsum("bqhd,bkhd->bhqk", do, vh)
    delta = np.einsum("bqhd,bqhd->bhq", do, out)[..., None]
    ds = p * (dp - delta)
    dq = scale * np.einsum("bhqk,bkhd->bqhd", ds, kh)
    dkh = scale * np.einsum("bhqk,bqhd->bkhd", ds, q64)
    b, sk, _, d = k.shape
    group = hq // hkv
    dk = dkh.reshape(b, sk, hkv, group, d).sum(axis=3)
    dv = dvh.reshape(b, sk, hkv, group, d).sum(axis=3)
    return dq, dk, dv


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
