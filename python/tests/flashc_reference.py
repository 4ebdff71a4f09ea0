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
