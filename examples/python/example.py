"""flashc from Python: causal GQA attention and RMSNorm on numpy arrays, each checked against a
float64 numpy computation, and one call that is meant to fail (the library's message arrives
in the exception).

    pip install ./python && python examples/python/example.py

Exits 0 when every result matches, 1 otherwise.
"""

import sys

import numpy as np

import flashc


def attention_reference(q, k, v, causal):
    """float64 softmax(q k^T / sqrt(D)) v on (B, S, H, D) arrays; GQA by repeating KV heads."""
    q, k, v = (x.astype(np.float64) for x in (q, k, v))
    group = q.shape[2] // k.shape[2]
    k, v = np.repeat(k, group, axis=2), np.repeat(v, group, axis=2)
    s = np.einsum("bihd,bjhd->bhij", q, k) / np.sqrt(q.shape[-1])
    if causal:  # bottom-right aligned: row i sees keys j <= i + Sk - Sq
        sq, sk = q.shape[1], k.shape[1]
        s = np.where(np.arange(sk)[None, :] <= np.arange(sq)[:, None] + sk - sq, s, -np.inf)
    p = np.exp(s - s.max(axis=-1, keepdims=True))
    p /= p.sum(axis=-1, keepdims=True)
    return np.einsum("bhij,bjhd->bihd", p, v)


def main() -> int:
    print(f"flashc {flashc.__version__}: {flashc.build_info()}")
    print(f"library: {flashc.library_path()}")
    rng = np.random.default_rng(0)
    B, Sq, Sk, Hq, Hkv, D = 2, 37, 53, 4, 2, 64
    q = rng.standard_normal((B, Sq, Hq, D), dtype=np.float32)
    k = rng.standard_normal((B, Sk, Hkv, D), dtype=np.float32)
    v = rng.standard_normal((B, Sk, Hkv, D), dtype=np.float32)
    ok = True

    out = flashc.flash_attn_func(q, k, v, causal=True)
    err = float(np.max(np.abs(out - attention_reference(q, k, v, causal=True))))
    print(f"attention {q.shape} causal GQA: max |error| {err:.2e}")
    ok &= err < 1e-5  # NaN compares false: fails

    w = rng.standard_normal(D, dtype=np.float32)
    y = flashc.rms_norm(out, w, eps=1e-6)
    o64 = out.astype(np.float64)
    ref = o64 / np.sqrt(np.mean(o64 * o64, axis=-1, keepdims=True) + 1e-6) * w
    err = float(np.max(np.abs(y - ref)))
    print(f"rms_norm {out.shape}: max |error| {err:.2e}")
    ok &= err < 1e-5

    try:  # 3 query heads cannot share 2 KV heads
        flashc.flash_attn_func(q[:, :, :3], k, v)
        print("bad call was accepted")
        ok = False
    except flashc.FlashcValueError as e:
        print(f"bad call -> {type(e).__name__} (status {e.status}): {e.detail}")

    print("ok" if ok else "FAILED")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
