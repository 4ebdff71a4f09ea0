"""The v2 attention API on numpy (and torch CPU where installed): window_size, softcap,
alibi_slopes, Dk != Dv, the varlen functions and flash_attn_with_kvcache, against the float64
references of flashc_reference.py (themselves checked against finite differences here).

The backward tests feed the library's backward the reference forward's out and lse, so they
run whatever the CPU forward serves. Tests of the forward entry points take a fixture that asks
the library first (a tiny valid problem): while the CPU forward answers FLASHC_ERR_UNSUPPORTED
for windows, varlen or KV caches, they skip with the library's reason and run once it serves
them."""

import numpy as np
import pytest

import flashc
import flashc_reference as ref
from conftest import unsupported_detail
from flashc import _lib


def randn(rng, *shape):
    return rng.standard_normal(shape).astype(np.float32)


def _skip_unless(call, what):
    missing = unsupported_detail(call)
    if missing is not None:
        pytest.skip(f"depends on the CPU forward serving {what} (flashc -> {missing})")


@pytest.fixture(scope="session")
def c_forward_v2():
    q = np.ones((1, 3, 1, 4), np.float32)
    _skip_unless(lambda: flashc.flash_attn_func(q, q, q, window_size=(1, 0), softcap=2.0),
                 "windows and softcap")


@pytest.fixture(scope="session")
def c_varlen_forward():
    q = np.ones((3, 1, 4), np.float32)
    cu = np.array([0, 3], np.int32)
    _skip_unless(lambda: flashc.flash_attn_varlen_func(q, q, q, cu, cu, 3, 3), "varlen")


@pytest.fixture(scope="session")
def c_kvcache_forward():
    q = np.ones((1, 1, 1, 4), np.float32)
    kc = np.ones((1, 4, 1, 4), np.float32)
    _skip_unless(lambda: flashc.flash_attn_with_kvcache(q, kc, kc.copy(), cache_seqlens=2),
                 "KV caches")


MODS = [
    {},
    {"causal": True},
    {"window_size": (0, 0)},
    {"window_size": (3, 1)},
    {"window_size": (-1, 2)},
    {"causal": True, "window_size": (4, -1)},
    {"softcap": 1.5},
    {"alibi_slopes": "h"},
    {"alibi_slopes": "bh", "causal": True},
    {"softcap": 2.0, "alibi_slopes": "bh", "window_size": (6, -1), "causal": True},
]


def _mods(rng, m, b, hq):
    """The modifier dict with "h" / "bh" replaced by float32 slopes (Hq) / (B, Hq)."""
    m = dict(m)
    if m.get("alibi_slopes") == "h":
        m["alibi_slopes"] = (0.05 + 0.5 * rng.random(hq)).astype(np.float32)
    elif m.get("alibi_slopes") == "bh":
        m["alibi_slopes"] = (0.05 + 0.5 * rng.random((b, hq))).astype(np.float32)
    return m


def _close(got, want, tol, what):
    got = np.asarray(got, np.float64)
    assert np.all(np.isfinite(got)), f"{what}: not finite"
    err = np.max(np.abs(got - want)) / max(1.0, np.max(np.abs(want)))
    assert err < tol, f"{what}: normalised error {err:.3g} >= {tol}"


# ---- the reference itself ------------------------------------------------------------------


@pytest.mark.parametrize("m", [{"window_size": (1, 0)}, {"softcap": 0.8},
                               {"alibi_slopes": "bh", "causal": True}, {"window_size": (2, 1),
                                                                        "softcap": 1.1}])
def test_reference_backward_matches_finite_differences(m):
    rng = np.random.default_rng(3)
    q, k, v = rng.standard_normal((2, 4, 2, 3)), rng.standard_normal((2, 6, 1, 3)), rng.standard_normal((2, 6, 1, 2))
    dout = rng.standard_normal((2, 4, 2, 2))
    m = _mods(rng, m, 2, 2)
    grads = ref.attn_bwd(dout, q, k, v, 0.7, **m)

    def loss(q_, k_, v_):
        return float(np.sum(ref.attn_fwd(q_, k_, v_, 0.7, **m)[0] * dout))

    for g, num in zip(grads, ref.finite_difference_grads(loss, [q, k, v], h=1e-6)):
        np.testing.assert_allclose(g, num, rtol=1e-6, atol=1e-7)


# ---- dense backward with the new options (needs only the C backward) ----------------------

SHAPES = [(2, 9, 13, 4, 2, 16, 16), (1, 17, 11, 3, 1, 24, 8), (1, 1, 20, 2, 2, 8, 12)]


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("m", MODS)
def test_backward_with_modifiers(rng, shape, m):
    b, sq, sk, hq, hkv, d, dv = shape
    q, k, v = randn(rng, b, sq, hq, d), randn(rng, b, sk, hkv, d), randn(rng, b, sk, hkv, dv)
    dout = randn(rng, b, sq, hq, dv)
    m = _mods(rng, m, b, hq)
    out, lse = ref.attn_fwd(q, k, v, **m)
    out32, lse32 = out.astype(np.float32), lse.astype(np.float32)
    got = flashc.flash_attn_backward(dout, q, k, v, out32, lse32, **m)
    want = ref.attn_bwd(dout, q, k, v, **m)
    for g, w, name in zip(got, want, ("dq", "dk", "dv")):
        assert g.shape == w.shape and g.dtype == np.float32
        _close(g, w, 2e-5, name)


def test_backward_softmax_scale_zero_is_a_scale(rng):
    """softmax_scale=0.0 means P uniform over the visible keys: dq = dk = 0 exactly."""
    q, k, v = randn(rng, 1, 5, 2, 8), randn(rng, 1, 7, 2, 8), randn(rng, 1, 7, 2, 8)
    dout = randn(rng, 1, 5, 2, 8)
    out, lse = ref.attn_fwd(q, k, v, scale=0.0, causal=True)
    dq, dk, dv = flashc.flash_attn_backward(dout, q, k, v, out.astype(np.float32),
                                            lse.astype(np.float32), softmax_scale=0.0, causal=True)
    assert np.all(dq == 0) and np.all(dk == 0)
    _close(dv, ref.attn_bwd(dout, q, k, v, scale=0.0, causal=True)[2], 2e-5, "dv")


@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
def test_backward_low_precision(rng, dtype):
    """bf16 (ml_dtypes) / f16 storage: the gradients within the 16-bit rounding of the float64
    gradients of the same rounded inputs."""
    if dtype == "bfloat16":
        ml_dtypes = pytest.importorskip("ml_dtypes")
        npdt, tol = ml_dtypes.bfloat16, 3e-2
    else:
        npdt, tol = np.float16, 4e-3
    m = {"causal": True, "window_size": (5, -1), "softcap": 2.0}
    q, k, v = randn(rng, 1, 19, 2, 16), randn(rng, 1, 23, 1, 16), randn(rng, 1, 23, 1, 8)
    dout = randn(rng, 1, 19, 2, 8)
    q, k, v, dout = (a.astype(npdt) for a in (q, k, v, dout))
    q64, k64, v64, do64 = (a.astype(np.float64) for a in (q, k, v, dout))
    out, lse = ref.attn_fwd(q64, k64, v64, **m)
    out16 = out.astype(np.float32).astype(npdt)
    got = flashc.flash_attn_backward(dout, q, k, v, out16, lse.astype(np.float32), **m)
    want = ref.attn_bwd(do64, q64, k64, v64, **m)
    for g, w, name in zip(got, want, ("dq", "dk", "dv")):
        assert g.dtype == npdt
        _close(g.astype(np.float64), w, tol, name)


# ---- varlen backward (needs only the C backward) ---------------------------------------------

LENS = [([5, 0, 12, 1, 7], [9, 4, 0, 1, 15]), ([16], [16]), ([3, 8], [10, 2])]


@pytest.mark.parametrize("lens", LENS)
@pytest.mark.parametrize("m", [{}, {"causal": True}, {"window_size": (3, 1), "softcap": 1.5},
                               {"alibi_slopes": "bh", "causal": True}])
def test_varlen_backward(rng, lens, m):
    lq, lk = lens
    cu_q = np.concatenate([[0], np.cumsum(lq)]).astype(np.int32)
    cu_k = np.concatenate([[0], np.cumsum(lk)]).astype(np.int64)  # converted to int32
    tq, tk = int(cu_q[-1]) + 2, int(cu_k[-1]) + 1  # rows that belong to no sequence
    hq, hkv, d, dv = 4, 2, 16, 12
    m = _mods(rng, m, len(lq), hq)
    q, k, v = randn(rng, tq, hq, d), randn(rng, tk, hkv, d), randn(rng, tk, hkv, dv)
    dout = randn(rng, tq, hq, dv)
    out, lse = ref.attn_varlen_fwd(q, k, v, cu_q, cu_k, **dict(m))
    got = flashc.flash_attn_varlen_backward(
        dout, q, k, v, out.astype(np.float32), lse.astype(np.float32), cu_q, cu_k, max(lq),
        max(lk), **m)
    want = ref.attn_varlen_bwd(dout, q, k, v, cu_q, cu_k, **dict(m))
    for g, w, name in zip(got, want, ("dq", "dk", "dv")):
        _close(g, w, 2e-5, name)
    assert np.all(got[0][cu_q[-1]:] == 0) and np.all(got[1][cu_k[-1]:] == 0)


# ---- forward entry points (need the CPU forward's v2 kernel) -------------------------------


@pytest.mark.parametrize("m", MODS)
def test_forward_with_modifiers(rng, c_forward_v2, m):
    b, sq, sk, hq, hkv, d, dv = 2, 9, 13, 4, 2, 16, 8
    q, k, v = randn(rng, b, sq, hq, d), randn(rng, b, sk, hkv, d), randn(rng, b, sk, hkv, dv)
    m = _mods(rng, m, b, hq)
    out, lse, probs = flashc.flash_attn_func(q, k, v, return_attn_probs=True, **m)
    want, wlse = ref.attn_fwd(q, k, v, **m)
    assert out.shape == (b, sq, hq, dv) and probs is None
    _close(out, want, 2e-6, "out")
    np.testing.assert_allclose(lse, wlse, rtol=1e-5, atol=1e-5)
    qkv = np.stack([q, randn(rng, b, sq, hq, d), randn(rng, b, sq, hq, d)], axis=2)
    out2 = flashc.flash_attn_qkvpacked_func(qkv, **m)
    _close(out2, ref.attn_fwd(qkv[:, :, 0], qkv[:, :, 1], qkv[:, :, 2], **m)[0], 2e-6,
           "qkvpacked")


def test_forward_softmax_scale_zero(rng, c_forward_v2):
    q, k, v = randn(rng, 1, 4, 2, 8), randn(rng, 1, 6, 2, 8), randn(rng, 1, 6, 2, 8)
    out = flashc.flash_attn_func(q, k, v, softmax_scale=0.0, window_size=(2, 0))
    _close(out, ref.attn_fwd(q, k, v, scale=0.0, window_size=(2, 0))[0], 2e-6, "out")


@pytest.mark.parametrize("m", [{}, {"causal": True, "softcap": 1.5},
                               {"window_size": (2, 2), "alibi_slopes": "bh"}])
def test_varlen_forward_and_packed(rng, c_varlen_forward, m):
    lq, lk = [5, 0, 12, 1], [9, 4, 0, 12]
    cu_q = np.concatenate([[0], np.cumsum(lq)]).astype(np.int32)
    cu_k = np.concatenate([[0], np.cumsum(lk)]).astype(np.int32)
    hq, hkv, d = 4, 2, 16
    m = _mods(rng, m, len(lq), hq)
    q, k, v = randn(rng, int(cu_q[-1]) + 1, hq, d), randn(rng, int(cu_k[-1]), hkv, d), randn(
        rng, int(cu_k[-1]), hkv, d)
    out, lse, probs = flashc.flash_attn_varlen_func(q, k, v, cu_q, cu_k, max(lq), max(lk),
                                                    return_attn_probs=True, **m)
    want, wlse = ref.attn_varlen_fwd(q, k, v, cu_q, cu_k, **dict(m))
    assert out.shape == q.shape and lse.shape == (hq, q.shape[0]) and probs is None
    _close(out, want, 2e-6, "out")
    np.testing.assert_allclose(lse, wlse, rtol=1e-5, atol=1e-5)
    kv = np.stack([k, v], axis=1)
    _close(flashc.flash_attn_varlen_kvpacked_func(q, kv, cu_q, cu_k, max(lq), max(lk), **m),
           want, 2e-6, "kvpacked")
    # qkvpacked: one set of lengths for q and k
    t = int(cu_q[-1])
    qkv = np.stack([q[:t], randn(rng, t, hq, d), randn(rng, t, hq, d)], axis=1)
    got = flashc.flash_attn_varlen_qkvpacked_func(qkv, cu_q, max(lq), **m)
    _close(got, ref.attn_varlen_fwd(qkv[:, 0], qkv[:, 1], qkv[:, 2], cu_q, cu_q, **dict(m))[0],
           2e-6, "qkvpacked")


@pytest.mark.parametrize("ps", [1, 5, 16])
@pytest.mark.parametrize("m", [{"causal": True}, {"window_size": (3, 1), "softcap": 2.0}])
def test_varlen_paged(rng, ps, m):
    """flash_attn_varlen_func(block_table=...): k, v paged caches (num_blocks, page_block_size,
    nheads_k, d), sequence b's keys in the pages of block_table[b] (shuffled, NaN in the rows
    that hold no key); the same as the packed call."""
    lq, lk = [5, 0, 12, 1], [9, 4, 0, 23]
    cu_q = np.concatenate([[0], np.cumsum(lq)]).astype(np.int32)
    cu_k = np.concatenate([[0], np.cumsum(lk)]).astype(np.int32)
    hq, hkv, d = 4, 2, 16
    q, k, v = randn(rng, int(cu_q[-1]), hq, d), randn(rng, int(cu_k[-1]), hkv, d), randn(
        rng, int(cu_k[-1]), hkv, d)
    want = flashc.flash_attn_varlen_func(q, k, v, cu_q, cu_k, max(lq), max(lk), **m)
    maxp = max(-(-n // ps) for n in lk)
    npages = len(lk) * maxp + 2
    table = rng.permutation(npages)[: len(lk) * maxp].reshape(len(lk), maxp).astype(np.int32)
    kc = np.full((npages, ps, hkv, d), np.nan, np.float32)
    vc = np.full((npages, ps, hkv, d), np.nan, np.float32)
    for b, n in enumerate(lk):
        for j in range(n):
            kc[table[b, j // ps], j % ps] = k[cu_k[b] + j]
            vc[table[b, j // ps], j % ps] = v[cu_k[b] + j]
    got = flashc.flash_attn_varlen_func(q, kc, vc, cu_q, cu_k, max(lq), max(lk),
                                        block_table=table, **m)
    np.testing.assert_array_equal(got, want)
    with pytest.raises(ValueError, match="4 dimensions"):
        flashc.flash_attn_varlen_func(q, k, v, cu_q, cu_k, max(lq), max(lk), block_table=table)
    bad = table.copy()
    bad[3, 0] = npages
    with pytest.raises(flashc.FlashcValueError, match="block_table"):
        flashc.flash_attn_varlen_func(q, kc, vc, cu_q, cu_k, max(lq), max(lk), block_table=bad)


@pytest.mark.parametrize("paged", [False, True])
@pytest.mark.parametrize("append", [False, True])
def test_kvcache(rng, c_kvcache_forward, paged, append):
    b, sq, hq, hkv, d, dv, cap = 3, 2, 4, 2, 16, 8, 24
    seqlens = np.array([5, 0, 17], np.int32)
    s_new = 3 if append else 0
    q = randn(rng, b, sq, hq, d)
    if paged:
        ps, npages = 4, 20
        k_cache, v_cache = randn(rng, npages, ps, hkv, d), randn(rng, npages, ps, hkv, dv)
        block_table = rng.permutation(npages)[: b * (cap // ps)].reshape(b, cap // ps).astype(np.int32)
    else:
        k_cache, v_cache = randn(rng, b, cap, hkv, d), randn(rng, b, cap, hkv, dv)
        block_table = None
    k_new = randn(rng, b, s_new, hkv, d) if append else None
    v_new = randn(rng, b, s_new, hkv, dv) if append else None
    m = {"causal": True, "window_size": (9, -1), "softcap": 3.0}
    want, wlse, kc, vc = ref.kvcache_fwd(q, k_cache, v_cache, k_new, v_new, seqlens,
                                         block_table=block_table, **m)
    out, lse = flashc.flash_attn_with_kvcache(
        q, k_cache, v_cache, k_new, v_new, cache_seqlens=seqlens, block_table=block_table,
        num_splits=2, return_softmax_lse=True, **m)
    _close(out, want, 2e-6, "out")
    np.testing.assert_allclose(lse, wlse, rtol=1e-5, atol=1e-5)
    np.testing.assert_array_equal(k_cache, kc.astype(np.float32))  # appended in place
    np.testing.assert_array_equal(v_cache, vc.astype(np.float32))


def _rotate_ref(x, cos, sin, interleaved, pos):
    """float64 rotation of x (B, S, H, D) with token s of sequence b at position pos[b][s]."""
    x = x.astype(np.float64)
    out, rd = x.copy(), 2 * cos.shape[-1]
    for b in range(x.shape[0]):
        c = cos[pos[b]].astype(np.float64)[:, None, :]
        s = sin[pos[b]].astype(np.float64)[:, None, :]
        if interleaved:
            x0, x1 = x[b, :, :, 0:rd:2], x[b, :, :, 1:rd:2]
            out[b, :, :, 0:rd:2], out[b, :, :, 1:rd:2] = x0 * c - x1 * s, x1 * c + x0 * s
        else:
            h = rd // 2
            x0, x1 = x[b, :, :, :h], x[b, :, :, h:rd]
            out[b, :, :, :h], out[b, :, :, h:rd] = x0 * c - x1 * s, x1 * c + x0 * s
    return out


@pytest.mark.parametrize("interleaved", [False, True])
@pytest.mark.parametrize("rd_frac", [1.0, 0.5])
@pytest.mark.parametrize("mode", ["causal", "local", "plain"])
def test_kvcache_rotary(rng, c_kvcache_forward, interleaved, rd_frac, mode):
    """flash-attn's rotary inside flash_attn_with_kvcache: the appended keys rotated at
    cache_seqlens[b] + s; q at the same positions (causal / local) or all at cache_seqlens[b]."""
    b, sq, hq, hkv, d, cap, s_new = 3, 3, 4, 2, 16, 24, 3
    seqlens = np.array([5, 0, 17], np.int32)
    rd = int(d * rd_frac)
    ang = np.arange(cap)[:, None] * 10000.0 ** (-np.arange(0, rd, 2) / rd)[None, :]
    cos, sin = np.cos(ang).astype(np.float32), np.sin(ang).astype(np.float32)
    q = randn(rng, b, sq, hq, d)
    k_cache, v_cache = randn(rng, b, cap, hkv, d), randn(rng, b, cap, hkv, d)
    k_new, v_new = randn(rng, b, s_new, hkv, d), randn(rng, b, s_new, hkv, d)
    m = {"causal": mode == "causal", "window_size": (4, 0) if mode == "local" else (-1, -1)}
    rows = [[int(seqlens[i]) + s for s in range(s_new)] for i in range(b)]
    qpos = rows if mode != "plain" else [[int(seqlens[i])] * sq for i in range(b)]
    q0, k0 = q.copy(), k_new.copy()
    want, wlse, kc, vc = ref.kvcache_fwd(_rotate_ref(q, cos, sin, interleaved, qpos), k_cache,
                                         v_cache, _rotate_ref(k_new, cos, sin, interleaved, rows),
                                         v_new, seqlens, **m)
    out, lse = flashc.flash_attn_with_kvcache(
        q, k_cache, v_cache, k_new, v_new, rotary_cos=cos, rotary_sin=sin, cache_seqlens=seqlens,
        rotary_interleaved=interleaved, return_softmax_lse=True, **m)
    _close(out, want, 2e-6, "out")
    np.testing.assert_allclose(lse, wlse, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(k_cache, kc, rtol=1e-6, atol=1e-6)  # rotated keys appended
    if mode == "plain":  # cache_seqlens as a list and as an int give the same as the array
        kc2 = randn(rng, b, cap, hkv, d)
        got = flashc.flash_attn_with_kvcache(q, kc2.copy(), v_cache.copy(), k_new, v_new, rotary_cos=cos,
                                             rotary_sin=sin, cache_seqlens=[int(x) for x in seqlens],
                                             rotary_interleaved=interleaved, **m)
        same = flashc.flash_attn_with_kvcache(q, kc2.copy(), v_cache.copy(), k_new, v_new, rotary_cos=cos,
                                              rotary_sin=sin, cache_seqlens=seqlens,
                                              rotary_interleaved=interleaved, **m)
        np.testing.assert_array_equal(got, same)
        one = flashc.flash_attn_with_kvcache(q, kc2.copy(), v_cache.copy(), k_new, v_new, rotary_cos=cos,
                                             rotary_sin=sin, cache_seqlens=np.int32(5),
                                             rotary_interleaved=interleaved, **m)
        five = flashc.flash_attn_with_kvcache(q, kc2.copy(), v_cache.copy(), k_new, v_new, rotary_cos=cos,
                                              rotary_sin=sin, cache_seqlens=np.full(b, 5, np.int32),
                                              rotary_interleaved=interleaved, **m)
        np.testing.assert_array_equal(one, five)
    np.testing.assert_array_equal(v_cache, vc.astype(np.float32))
    np.testing.assert_array_equal(q, q0)  # the caller's q and k are left as they were
    np.testing.assert_array_equal(k_new, k0)


@pytest.mark.parametrize("append", [False, True])
def test_kvcache_leftpad(rng, c_kvcache_forward, append):
    """cache_leftpad: sequence b's keys are cache rows [leftpad[b], cache_seqlens[b] + S_new),
    the masks and ALiBi aligned to them; k_new lands at rows cache_seqlens[b].. (flash-attn's
    semantics); with cache_batch_idx and split-KV; leftpad 0 for every sequence is no leftpad."""
    b, sq, hq, hkv, d, dv, cap = 3, 3, 4, 2, 16, 8, 40
    seqlens = np.array([9, 4, 30], np.int32)
    leftpad = np.array([3, 4, 0], np.int32)  # sequence 1: only the appended keys (or none)
    s_new = 2 if append else 0
    q = randn(rng, b, sq, hq, d)
    k_cache, v_cache = randn(rng, b + 1, cap, hkv, d), randn(rng, b + 1, cap, hkv, dv)
    idx = np.array([2, 0, 3], np.int32)
    k_new = randn(rng, b, s_new, hkv, d) if append else None
    v_new = randn(rng, b, s_new, hkv, dv) if append else None
    slopes = np.abs(randn(rng, b, hq)) * 0.3
    for m in ({"causal": True}, {"window_size": (5, 1), "alibi_slopes": slopes}, {}):
        kc, vc = k_cache.copy(), v_cache.copy()
        want, wlse, wkc, wvc = ref.kvcache_fwd(q, kc, vc, k_new, v_new, seqlens, cache_batch_idx=idx,
                                               cache_leftpad=leftpad, **dict(m))
        for splits in (1, 3):
            kc, vc = k_cache.copy(), v_cache.copy()
            out, lse = flashc.flash_attn_with_kvcache(
                q, kc, vc, k_new, v_new, cache_seqlens=seqlens, cache_batch_idx=idx,
                cache_leftpad=leftpad, num_splits=splits, return_softmax_lse=True, **m)
            _close(out, want, 2e-6, f"out {m} splits {splits}")
            np.testing.assert_allclose(lse, wlse, rtol=1e-5, atol=1e-5)
            np.testing.assert_array_equal(kc, wkc.astype(np.float32))  # appended at cache_seqlens
            np.testing.assert_array_equal(vc, wvc.astype(np.float32))
    zero = flashc.flash_attn_with_kvcache(q, k_cache.copy(), v_cache.copy(), k_new, v_new,
                                          cache_seqlens=seqlens, cache_batch_idx=idx,
                                          cache_leftpad=np.zeros(b, np.int32), causal=True)
    none = flashc.flash_attn_with_kvcache(q, k_cache.copy(), v_cache.copy(), k_new, v_new,
                                          cache_seqlens=seqlens, cache_batch_idx=idx, causal=True)
    np.testing.assert_array_equal(zero, none)


def test_kvcache_int_seqlens_and_batch_idx(rng, c_kvcache_forward):
    q = randn(rng, 2, 1, 2, 8)
    k_cache, v_cache = randn(rng, 4, 10, 1, 8), randn(rng, 4, 10, 1, 8)
    idx = np.array([3, 1], np.int32)
    out = flashc.flash_attn_with_kvcache(q, k_cache, v_cache, cache_seqlens=7, cache_batch_idx=idx)
    want = ref.kvcache_fwd(q, k_cache, v_cache, cache_seqlens=[7, 7], cache_batch_idx=idx)[0]
    _close(out, want, 2e-6, "out")


# ---- refusals that need no kernel ----------------------------------------------------------


def test_kvcache_refusals(rng):
    q = randn(rng, 1, 1, 2, 8)
    kc, vc = randn(rng, 1, 8, 2, 8), randn(rng, 1, 8, 2, 8)
    cos = np.ones((8, 4), np.float32)
    with pytest.raises(ValueError, match="new k and v"):
        flashc.flash_attn_with_kvcache(q, kc, vc, rotary_cos=cos, rotary_sin=cos, cache_seqlens=1)
    with pytest.raises(ValueError, match="together"):
        flashc.flash_attn_with_kvcache(q, kc, vc, k=q[:, :, :2], v=q[:, :, :2], rotary_cos=cos,
                                       cache_seqlens=1)
    with pytest.raises(ValueError, match="cache_seqlens"):
        flashc.flash_attn_with_kvcache(q, kc, vc, k=q[:, :, :2], v=q[:, :, :2], rotary_cos=cos,
                                       rotary_sin=cos)
    # cache_leftpad: past cache_seqlens, negative, paged, without cache_seqlens, wrong length
    with pytest.raises(ValueError, match="cache_leftpad"):
        flashc.flash_attn_with_kvcache(q, kc, vc, cache_seqlens=1,
                                       cache_leftpad=np.full(1, 2, np.int32))
    with pytest.raises(ValueError, match="cache_leftpad"):
        flashc.flash_attn_with_kvcache(q, kc, vc, cache_seqlens=1,
                                       cache_leftpad=np.full(1, -1, np.int32))
    with pytest.raises(ValueError, match="contiguous"):
        flashc.flash_attn_with_kvcache(q, kc, vc, cache_seqlens=1, block_table=np.zeros((1, 1), np.int32),
                                       cache_leftpad=np.zeros(1, np.int32))
    with pytest.raises(ValueError, match="cache_seqlens"):
        flashc.flash_attn_with_kvcache(q, kc, vc, cache_leftpad=np.zeros(1, np.int32))
    with pytest.raises(ValueError, match="cache_leftpad"):
        flashc.flash_attn_with_kvcache(q, kc, vc, cache_seqlens=1, cache_leftpad=np.zeros(2, np.int32))
    with pytest.raises(ValueError, match="together"):
        flashc.flash_attn_with_kvcache(q, kc, vc, k=q[:, :, :1])
    ro = kc.copy()
    ro.flags.writeable = False
    with pytest.raises(ValueError, match="read-only"):
        flashc.flash_attn_with_kvcache(q, ro, vc, k=q[:, :, :2], v=q[:, :, :2], cache_seqlens=1)
    with pytest.raises(ValueError, match="in place"):
        flashc.flash_attn_with_kvcache(q, kc[:, ::-1], vc, k=q[:, :, :2], v=q[:, :, :2],
                                       cache_seqlens=1)
    with pytest.raises(TypeError, match="int32"):
        flashc.flash_attn_with_kvcache(q, kc, vc, cache_seqlens=np.ones(1, np.float32))


def test_varlen_refusals(rng):
    q = randn(rng, 4, 2, 8)
    cu = np.array([0, 4], np.int32)
    with pytest.raises(NotImplementedError, match="dropout_p"):
        flashc.flash_attn_varlen_func(q, q, q, cu, cu, 4, 4, dropout_p=0.1)
    with pytest.raises(ValueError, match="3 dimensions"):
        flashc.flash_attn_varlen_func(q[None], q, q, cu, cu, 4, 4)
    # the library validates cu_seqlens (monotone, within the packed rows) before writing
    bad = np.array([0, 5], np.int32)
    with pytest.raises(flashc.FlashcValueError, match="cu_seqlens_q"):
        flashc.flash_attn_varlen_backward(q, q, q, q, q, np.zeros((2, 4), np.float32), bad, cu,
                                          5, 4)


# ---- torch autograd (skips without torch) --------------------------------------------------


def _torch():
    return pytest.importorskip("torch")


def test_torch_varlen_autograd(rng):
    torch = _torch()
    lq, lk = [5, 0, 9], [7, 3, 9]
    cu_q = torch.tensor(np.concatenate([[0], np.cumsum(lq)]), dtype=torch.int32)
    cu_k = torch.tensor(np.concatenate([[0], np.cumsum(lk)]), dtype=torch.int32)
    m = {"causal": True, "window_size": (4, -1), "softcap": 1.5}
    qn, kn, vn = randn(rng, 14, 4, 16), randn(rng, 19, 2, 16), randn(rng, 19, 2, 8)
    don = randn(rng, 14, 4, 8)
    q, k, v = (torch.tensor(a, requires_grad=True) for a in (qn, kn, vn))
    try:
        out = flashc.flash_attn_varlen_func(q, k, v, cu_q, cu_k, 9, 9, **m)
    except flashc.FlashcError as e:
        if e.status == _lib.ERR_UNSUPPORTED:
            pytest.skip(f"depends on the CPU forward serving varlen ({e.detail})")
        raise
    out.backward(torch.tensor(don))
    want = ref.attn_varlen_bwd(don, qn, kn, vn, cu_q.numpy(), cu_k.numpy(), **m)
    for t, w, name in zip((q, k, v), want, ("dq", "dk", "dv")):
        _close(t.grad.numpy(), w, 2e-5, name)


def test_torch_dense_autograd_with_modifiers(rng):
    torch = _torch()
    m = {"window_size": (3, 1), "softcap": 2.0}
    qn, kn, vn, don = randn(rng, 1, 9, 2, 16), randn(rng, 1, 11, 1, 16), randn(rng, 1, 11, 1, 8), randn(rng, 1, 9, 2, 8)
    slopes = torch.tensor((0.1 + rng.random(2)).astype(np.float32))
    q, k, v = (torch.tensor(a, requires_grad=True) for a in (qn, kn, vn))
    try:
        out = flashc.flash_attn_func(q, k, v, alibi_slopes=slopes, **m)
    except flashc.FlashcError as e:
        if e.status == _lib.ERR_UNSUPPORTED:
            pytest.skip(f"depends on the CPU forward serving windows ({e.detail})")
        raise
    out.backward(torch.tensor(don))
    want = ref.attn_bwd(don, qn, kn, vn, alibi_slopes=slopes.numpy(), **m)
    for t, w, name in zip((q, k, v), want, ("dq", "dk", "dv")):
        _close(t.grad.numpy(), w, 2e-5, name)
