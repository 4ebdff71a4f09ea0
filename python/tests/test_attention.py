"""flash_attn_func / qkvpacked / kvpacked on numpy arrays against the float64 reference."""

import numpy as np
import pytest

import flashc
import flashc_reference as ref

# (B, Sq, Sk, Hq, Hkv, D): n = 1, odd lengths not divisible by any tile, Sq != Sk both ways,
# GQA and MQA, non-power-of-two head dims.
SHAPES = [
    (1, 1, 1, 1, 1, 1),
    (2, 5, 7, 4, 2, 16),
    (1, 17, 13, 3, 1, 40),
    (3, 33, 65, 6, 3, 24),
    (1, 64, 64, 2, 2, 64),
    (2, 70, 131, 4, 4, 80),
    (1, 9, 4, 2, 1, 8),  # causal: Sq > Sk, the first rows see no key
    (1, 1, 37, 8, 2, 96),  # decode-like
]


def randn(rng, *shape, dtype=np.float32):
    return rng.standard_normal(shape).astype(dtype)


def qkv_of(rng, b, sq, sk, hq, hkv, d, dtype=np.float32):
    return randn(rng, b, sq, hq, d, dtype=dtype), randn(rng, b, sk, hkv, d, dtype=dtype), randn(
        rng, b, sk, hkv, d, dtype=dtype
    )


def assert_close_fp32(got, want, what):
    """fp32 result vs float64 reference: NaN never passes; errors at fp32 rounding scale."""
    assert np.all(np.isfinite(got) | np.isneginf(want)), f"{what}: non-finite values"
    np.testing.assert_allclose(got, want, rtol=2e-5, atol=2e-5, err_msg=what)


@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "B%d_Sq%d_Sk%d_Hq%d_Hkv%d_D%d" % s)
@pytest.mark.parametrize("causal", [False, True])
def test_forward_matches_reference(rng, shape, causal):
    q, k, v = qkv_of(rng, *shape)
    out, lse, probs = flashc.flash_attn_func(q, k, v, causal=causal, return_attn_probs=True)
    want_out, want_lse = ref.attn_fwd(q, k, v, causal=causal)
    b, sq, sk, hq, hkv, d = shape
    assert out.shape == (b, sq, hq, d) and out.dtype == np.float32
    assert lse.shape == (b, hq, sq) and lse.dtype == np.float32
    assert probs is None
    assert_close_fp32(out, want_out, "out")
    assert np.array_equal(np.isneginf(lse), np.isneginf(want_lse)), "lse: -inf rows differ"
    fin = np.isfinite(want_lse)
    np.testing.assert_allclose(lse[fin], want_lse[fin], rtol=1e-5, atol=1e-5, err_msg="lse")


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("scale", [0.05, 1.0, 2.5])
def test_softmax_scale(rng, scale, causal):
    q, k, v = qkv_of(rng, 2, 11, 19, 4, 2, 32)
    out = flashc.flash_attn_func(q, k, v, softmax_scale=scale, causal=causal)
    assert_close_fp32(out, ref.attn_fwd(q, k, v, scale=scale, causal=causal)[0], f"scale {scale}")


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("shape", [(1, 11, 19, 2, 2, 32), (1, 64, 64, 2, 1, 64), (1, 3, 5, 2, 2, 8)])
@pytest.mark.parametrize("magnitude", [1.0, 5.0])
def test_negative_softmax_scale(rng, shape, causal, magnitude):
    """The header allows any finite scale. A negative one makes the smallest q.k dominate; a
    masked score must stay masked (-inf after scaling) and nothing may overflow. A backend may
    refuse it (FLASHC_ERR_UNSUPPORTED, as the CUDA one does); what it computes must be right."""
    q, k, v = qkv_of(rng, *shape)
    q *= magnitude
    k *= magnitude
    try:
        out, lse, _ = flashc.flash_attn_func(q, k, v, softmax_scale=-0.3, causal=causal, return_attn_probs=True)
    except NotImplementedError as e:
        assert isinstance(e, flashc.FlashcError) and "scale" in e.detail
        return
    want, want_lse = ref.attn_fwd(q, k, v, scale=-0.3, causal=causal)
    # fp32 rounding of a score grows with its size (magnitude**2 here), and so does its effect
    assert np.all(np.isfinite(out)), "non-finite out"
    tol = 2e-5 * magnitude**2
    np.testing.assert_allclose(out, want, rtol=tol, atol=tol, err_msg="out")
    np.testing.assert_allclose(lse, want_lse, rtol=1e-5, atol=tol, err_msg="lse")


def test_return_conventions(rng):
    q, k, v = qkv_of(rng, 1, 3, 3, 2, 2, 8)
    out = flashc.flash_attn_func(q, k, v)
    assert isinstance(out, np.ndarray)
    res = flashc.flash_attn_func(q, k, v, return_attn_probs=True)
    assert isinstance(res, tuple) and len(res) == 3 and res[2] is None
    assert np.array_equal(res[0], out)
    # deterministic is accepted (the flashc backward is always deterministic)
    assert np.array_equal(flashc.flash_attn_func(q, k, v, deterministic=True), out)


def test_causal_is_bottom_right_aligned(rng):
    # v = one-hot over keys, so out[0, i, 0, :Sk] is row i of P: the mask is visible directly.
    for sq, sk in [(3, 5), (5, 5), (6, 3)]:
        q, k = randn(rng, 1, sq, 1, 8), randn(rng, 1, sk, 1, 8)
        v = np.zeros((1, sk, 1, 8), np.float32)
        v[0, np.arange(sk), 0, np.arange(sk)] = 1.0
        out, lse, _ = flashc.flash_attn_func(q, k, v, causal=True, return_attn_probs=True)
        p = out[0, :, 0, :sk]
        for i in range(sq):
            last = i + sk - sq  # the last key row i may see
            assert np.all(p[i, last + 1:] == 0.0), f"Sq={sq} Sk={sk}: row {i} sees keys past {last}"
            if last >= 0:
                assert np.all(p[i, : last + 1] > 0.0), f"Sq={sq} Sk={sk}: row {i} misses keys"
                assert np.isfinite(lse[0, 0, i])
            else:
                assert np.all(out[0, i] == 0.0) and np.isneginf(lse[0, 0, i]), f"row {i} sees none"


def test_gqa_equals_repeated_kv(rng):
    q, k, v = qkv_of(rng, 2, 13, 21, 6, 2, 24)
    rep = lambda t: np.repeat(t, 3, axis=2)  # noqa: E731
    for causal in (False, True):
        out_gqa, lse_gqa, _ = flashc.flash_attn_func(q, k, v, causal=causal, return_attn_probs=True)
        out_mha, lse_mha, _ = flashc.flash_attn_func(
            q, rep(k), rep(v), causal=causal, return_attn_probs=True
        )
        np.testing.assert_allclose(out_gqa, out_mha, rtol=1e-6, atol=1e-6)
        np.testing.assert_allclose(lse_gqa, lse_mha, rtol=1e-6, atol=1e-6)


def test_qkvpacked(rng):
    qkv = randn(rng, 2, 19, 3, 4, 40)
    for causal in (False, True):
        out, lse, _ = flashc.flash_attn_qkvpacked_func(qkv, causal=causal, return_attn_probs=True)
        want_out, want_lse = ref.attn_fwd(qkv[:, :, 0], qkv[:, :, 1], qkv[:, :, 2], causal=causal)
        assert_close_fp32(out, want_out, "out")
        np.testing.assert_allclose(lse, want_lse, rtol=1e-5, atol=1e-5)
    assert isinstance(flashc.flash_attn_qkvpacked_func(qkv), np.ndarray)


def test_kvpacked_gqa(rng):
    q = randn(rng, 2, 7, 6, 16)
    kv = randn(rng, 2, 23, 2, 3, 16)
    for causal in (False, True):
        out, lse, _ = flashc.flash_attn_kvpacked_func(q, kv, causal=causal, return_attn_probs=True)
        want_out, want_lse = ref.attn_fwd(q, kv[:, :, 0], kv[:, :, 1], causal=causal)
        assert_close_fp32(out, want_out, "out")
        np.testing.assert_allclose(lse, want_lse, rtol=1e-5, atol=1e-5)


def test_packed_shape_errors(rng):
    with pytest.raises(ValueError, match="qkv has shape"):
        flashc.flash_attn_qkvpacked_func(randn(rng, 2, 5, 2, 4, 8))
    with pytest.raises(ValueError, match="kv has shape"):
        flashc.flash_attn_kvpacked_func(randn(rng, 2, 5, 4, 8), randn(rng, 2, 5, 3, 4, 8))


def test_non_contiguous_views(rng):
    b, sq, sk, hq, hkv, d = 2, 15, 27, 4, 2, 24
    # (B, H, S, D) buffers viewed as (B, S, H, D): strides pass straight through
    q = randn(rng, b, hq, sq, d).transpose(0, 2, 1, 3)
    k = randn(rng, b, hkv, sk, d).transpose(0, 2, 1, 3)
    # a slice of a wider buffer: every stride differs from the contiguous one
    v = randn(rng, b, 2 * sk, hkv + 1, d + 5)[:, ::2, 1:, 3 : 3 + d]
    assert not (q.flags.c_contiguous or k.flags.c_contiguous or v.flags.c_contiguous)
    for causal in (False, True):
        out, lse, _ = flashc.flash_attn_func(q, k, v, causal=causal, return_attn_probs=True)
        want_out, want_lse = ref.attn_fwd(q, k, v, causal=causal)
        assert_close_fp32(out, want_out, "out")
        np.testing.assert_allclose(lse, want_lse, rtol=1e-5, atol=1e-5)
        assert out.flags.c_contiguous


def test_negative_and_zero_strides(rng):
    q, k, v = qkv_of(rng, 1, 9, 12, 4, 1, 16)
    # negative stride: flashc_tensor cannot express it, the binding copies (documented)
    qf = q[:, ::-1]
    assert_close_fp32(flashc.flash_attn_func(qf, k, v), ref.attn_fwd(qf, k, v)[0], "q[:, ::-1]")
    # zero stride: MQA k/v broadcast to 4 heads without a copy
    kb, vb = np.broadcast_to(k, (1, 12, 4, 16)), np.broadcast_to(v, (1, 12, 4, 16))
    assert kb.strides[2] == 0
    np.testing.assert_allclose(
        flashc.flash_attn_func(q, kb, vb), flashc.flash_attn_func(q, k, v), rtol=1e-6, atol=1e-6
    )


def test_misaligned_and_byte_strided_arrays_are_copied(rng):
    q, k, v = qkv_of(rng, 1, 6, 8, 2, 2, 8)
    raw = np.zeros(q.nbytes + 1, np.uint8)
    raw[1:] = q.view(np.uint8).ravel()
    qm = raw[1:].view(np.float32).reshape(q.shape)  # float32 data at an odd address
    assert not qm.flags.aligned and np.array_equal(qm, q)
    rec = np.zeros(k.shape, dtype=[("a", np.float32), ("b", np.uint8)])  # packed: 5-byte items
    rec["a"] = k
    ks = rec["a"]
    assert ks.strides[-1] == 5
    want = ref.attn_fwd(q, k, v, causal=True)[0]
    assert_close_fp32(flashc.flash_attn_func(qm, ks, v, causal=True), want, "copied views")


def test_inputs_unchanged(rng):
    q, k, v = qkv_of(rng, 2, 9, 14, 4, 2, 16)
    before = [t.copy() for t in (q, k, v)]
    flashc.flash_attn_func(q, k, v, causal=True, return_attn_probs=True)
    for t, t0 in zip((q, k, v), before):
        assert np.array_equal(t, t0)


def test_float16(rng):
    """The CPU backend computes float16 storage (flashc.h), within 2x of a naive float16
    implementation's error against float64."""
    q, k, v = qkv_of(rng, 1, 21, 30, 4, 2, 32, dtype=np.float16)
    assert flashc.attn_fwd_supported(q, k, v), flashc.last_error()
    out, lse, _ = flashc.flash_attn_func(q, k, v, causal=True, return_attn_probs=True)
    assert out.dtype == np.float16 and lse.dtype == np.float32
    want, want_lse = ref.attn_fwd(q, k, v, causal=True)  # from the fp16 values, in fp64
    naive = ref.attn_fwd_naive_lowp(q, k, v, "float16", causal=True)
    err = np.max(np.abs(out.astype(np.float64) - want))
    assert np.all(np.isfinite(out)) and err <= 2 * np.max(np.abs(naive - want)), err
    np.testing.assert_allclose(lse, want_lse, rtol=1e-4, atol=1e-4)


# ---- errors --------------------------------------------------------------------------------


# window_size, softcap and alibi_slopes are served by the library (test_v2.py); dropout is not.
@pytest.mark.parametrize("option, kwargs", [("dropout_p", {"dropout_p": 0.1})])
def test_unsupported_options_are_refused_by_name(rng, option, kwargs):
    q, k, v = qkv_of(rng, 1, 4, 4, 2, 2, 8)
    qkv = np.stack([q, k, v], axis=2)
    with pytest.raises(NotImplementedError, match=option):
        flashc.flash_attn_func(q, k, v, **kwargs)
    with pytest.raises(NotImplementedError, match=option):
        flashc.flash_attn_qkvpacked_func(qkv, **kwargs)
    with pytest.raises(NotImplementedError, match=option):
        flashc.flash_attn_kvpacked_func(q, qkv[:, :, 1:], **kwargs)


def test_window_size_list_default_is_accepted(rng):
    q, k, v = qkv_of(rng, 1, 4, 4, 2, 2, 8)
    assert flashc.flash_attn_func(q, k, v, window_size=[-1, -1]).shape == q.shape


@pytest.mark.parametrize(
    "what, shapes, exc, detail",
    [
        ("head dim", ((1, 4, 2, 16), (1, 6, 2, 8), (1, 6, 2, 8)), ValueError, "head dim"),
        ("heads not a multiple", ((1, 4, 3, 8), (1, 6, 2, 8), (1, 6, 2, 8)), ValueError, "not a multiple"),
        ("k/v heads", ((1, 4, 4, 8), (1, 6, 2, 8), (1, 6, 4, 8)), ValueError, "heads"),
        ("batch", ((2, 4, 2, 8), (1, 6, 2, 8), (1, 6, 2, 8)), ValueError, "batch"),
        ("k/v lengths", ((1, 4, 2, 8), (1, 6, 2, 8), (1, 5, 2, 8)), ValueError, "seqlen"),
        ("rank", ((1, 4, 2, 8), (6, 2, 8), (6, 2, 8)), ValueError, "4 dimensions"),
        ("empty", ((1, 0, 2, 8), (1, 6, 2, 8), (1, 6, 2, 8)), ValueError, "must be > 0"),
    ],
)
def test_shape_errors(rng, what, shapes, exc, detail):
    q, k, v = (randn(rng, *s) for s in shapes)
    with pytest.raises(exc, match=detail) as e:
        flashc.flash_attn_func(q, k, v)
    if isinstance(e.value, flashc.FlashcError):  # raised by the library: carries its detail
        assert e.value.detail and e.value.detail in str(e.value)
        assert e.value.detail == flashc.last_error()


def test_library_error_carries_status_and_detail(rng):
    q, k, v = qkv_of(rng, 1, 4, 4, 3, 2, 8)
    with pytest.raises(flashc.FlashcValueError) as e:
        flashc.flash_attn_func(q, k, v)
    assert e.value.status == flashc._lib.ERR_HEAD_MISMATCH
    assert "flashc_attn_fwd: q has 3 heads, not a multiple of k/v's 2 heads" in str(e.value)


def test_dtype_errors(rng):
    q, k, v = qkv_of(rng, 1, 4, 4, 2, 2, 8)
    with pytest.raises(TypeError, match="float64"):
        flashc.flash_attn_func(q.astype(np.float64), k, v)
    with pytest.raises(TypeError, match="int32"):
        flashc.flash_attn_func(q, k.astype(np.int32), v)
    with pytest.raises(TypeError) as e:  # the library's dtype mismatch
        flashc.flash_attn_func(q, k.astype(np.float16), v)
    assert isinstance(e.value, flashc.FlashcError) and "k is float16 but q is float32" in str(e.value)
    with pytest.raises(TypeError, match="numpy.ndarray or a torch.Tensor"):
        flashc.flash_attn_func(q.tolist(), k, v)


def test_non_finite_scale_is_a_value_error(rng):
    q, k, v = qkv_of(rng, 1, 4, 4, 2, 2, 8)
    with pytest.raises(ValueError, match="softmax_scale = inf is not finite"):
        flashc.flash_attn_func(q, k, v, softmax_scale=float("inf"))


def test_failed_call_leaves_nothing_half_done(rng):
    # an error must not poison the next call on this thread
    q, k, v = qkv_of(rng, 1, 5, 6, 2, 2, 8)
    with pytest.raises(ValueError):
        flashc.flash_attn_func(q, k[..., :4], v)
    assert_close_fp32(flashc.flash_attn_func(q, k, v), ref.attn_fwd(q, k, v)[0], "after error")


def test_error_details_are_per_thread(rng):
    # flashc_last_error() is per thread; each thread's exception must carry its own detail
    import threading

    q, k, v = qkv_of(rng, 1, 5, 6, 4, 2, 8)
    cases = {
        "dim": (q, k[..., :4], v[..., :4], "k.shape[3] (head dim) = 4"),
        "heads": (q[:, :, :3], k, v, "q has 3 heads"),
        "batch": (np.concatenate([q, q]), k, v, "k.shape[0] (batch) = 1 but q has 2"),
    }
    seen = {}

    def worker(name, a, b, c):
        for _ in range(200):
            try:
                flashc.flash_attn_func(a, b, c)
            except ValueError as e:
                seen.setdefault(name, set()).add(e.detail)

    threads = [threading.Thread(target=worker, args=(n, *c[:3])) for n, c in cases.items()]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for name, (_, _, _, want) in cases.items():
        assert len(seen[name]) == 1 and want in next(iter(seen[name])), (name, seen[name])


def test_numpy_bfloat16(rng):
    """ml_dtypes bfloat16 arrays are computed in bf16 storage by the CPU backend."""
    ml_dtypes = pytest.importorskip("ml_dtypes")
    q, k, v = (a.astype(ml_dtypes.bfloat16) for a in qkv_of(rng, 1, 13, 17, 2, 1, 32))
    assert flashc.attn_fwd_supported(q, k, v), flashc.last_error()
    out = flashc.flash_attn_func(q, k, v, causal=True)
    assert out.dtype == q.dtype
    q64, k64, v64 = (a.astype(np.float64) for a in (q, k, v))
    want = ref.attn_fwd(q64, k64, v64, causal=True)[0]
    naive = ref.attn_fwd_naive_lowp(q64, k64, v64, "bfloat16", causal=True)
    err = np.max(np.abs(out.astype(np.float64) - want))
    assert err <= 2 * np.max(np.abs(naive - want)), err


def test_a_refused_layout_is_retried_with_contiguous_copies(rng, monkeypatch):
    """A backend may refuse a valid strided layout with FLASHC_ERR_UNSUPPORTED (the CUDA backend
    wants a unit headdim stride); the binding then retries once with contiguous copies. Shown
    here with the CPU library behind a stand-in that refuses as the CUDA backend would."""
    lib = flashc._lib.library()
    real = lib.flashc_attn_fwd
    calls = []

    def refusing(params, q, k, v, o, lse, stats):
        strides = [list(t._obj.stride)[:4] for t in (q, k, v)]
        calls.append(strides)
        if any(s[3] != 1 for s in strides):
            return flashc._lib.ERR_UNSUPPORTED
        return real(params, q, k, v, o, lse, stats)

    monkeypatch.setattr(lib, "flashc_attn_fwd", refusing)
    q, k, v = qkv_of(rng, 2, 7, 9, 4, 2, 16)
    v_strided = np.repeat(v, 2, axis=3)[..., ::2]  # headdim stride 2, same values as v
    out = flashc.flash_attn_func(q, k, v_strided, causal=True)
    assert len(calls) == 2 and calls[0][2][3] == 2 and calls[1][2][3] == 1
    assert calls[1][0] == calls[0][0]  # q was already plain: passed as is, not copied
    assert_close_fp32(out, ref.attn_fwd(q, k, v, causal=True)[0], "after the retry")
    # a refusal that copies cannot cure is reported, after one retry
    calls.clear()
    monkeypatch.setattr(lib, "flashc_attn_fwd", lambda *a: flashc._lib.ERR_UNSUPPORTED)
    with pytest.raises(NotImplementedError):
        flashc.flash_attn_func(q, k, v_strided)


def test_softmax_scale_zero_is_a_real_scale(rng):
    """softmax_scale=0.0 means a scale of 0 (uniform attention over the visible keys), not the
    default: the C API says "default" through has_softmax_scale."""
    q, k, v = qkv_of(rng, 1, 5, 7, 2, 2, 8)
    out = flashc.flash_attn_func(q, k, v, softmax_scale=0.0)
    want = np.broadcast_to(v.astype(np.float64).mean(axis=1, keepdims=True), out.shape)
    np.testing.assert_allclose(out, want, rtol=1e-5, atol=1e-6)
