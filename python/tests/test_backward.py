"""flash_attn_backward on numpy arrays against the float64 analytic reference, which is itself
checked against finite differences here. Tests that need the C backward take the c_backward
fixture: it skips them (with the library's reason) while flashc_attn_bwd answers
FLASHC_ERR_UNSUPPORTED for a valid float32 host problem."""

import numpy as np
import pytest

import flashc
import flashc_reference as ref
from flashc import _lib

SHAPES = [
    (1, 1, 1, 1, 1, 1),
    (2, 5, 7, 4, 2, 16),
    (1, 17, 13, 3, 1, 40),
    (2, 33, 65, 6, 3, 24),
    (1, 64, 64, 2, 2, 64),
    (1, 9, 4, 2, 1, 8),  # causal: Sq > Sk, rows with no key
    (1, 1, 37, 8, 2, 96),
]


def randn(rng, *shape):
    return rng.standard_normal(shape).astype(np.float32)


def problem(rng, b, sq, sk, hq, hkv, d):
    return randn(rng, b, sq, hq, d), randn(rng, b, sk, hkv, d), randn(rng, b, sk, hkv, d), randn(
        rng, b, sq, hq, d
    )


@pytest.mark.parametrize("causal", [False, True])
def test_reference_backward_matches_finite_differences(causal):
    """The oracle itself: analytic float64 gradients vs central differences of
    L = sum(out * dout), every element of q, k and v, GQA, Sq != Sk."""
    rng = np.random.default_rng(7)
    b, sq, sk, hq, hkv, d = 1, 4, 6, 4, 2, 3
    q, k, v = (rng.standard_normal(s) for s in ((b, sq, hq, d), (b, sk, hkv, d), (b, sk, hkv, d)))
    dout = rng.standard_normal((b, sq, hq, d))
    scale = 0.7
    grads = ref.attn_bwd(dout, q, k, v, scale=scale, causal=causal)

    def loss(q_, k_, v_):
        return float(np.sum(ref.attn_fwd(q_, k_, v_, scale=scale, causal=causal)[0] * dout))

    nums = ref.finite_difference_grads(loss, [q, k, v], h=1e-6)
    for which, (g, num) in enumerate(zip(grads, nums)):
        np.testing.assert_allclose(g, num, rtol=1e-6, atol=1e-7, err_msg="dq dk dv"[3 * which : 3 * which + 2])


def assert_grad_close(got, want, what):
    assert np.all(np.isfinite(got)), f"{what}: non-finite values"
    # fp32 recomputation: relative to the gradient's own magnitude
    scale = max(1.0, float(np.max(np.abs(want))))
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=2e-5 * scale, err_msg=what)


@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "B%d_Sq%d_Sk%d_Hq%d_Hkv%d_D%d" % s)
@pytest.mark.parametrize("causal", [False, True])
def test_backward_matches_reference(c_backward, rng, shape, causal):
    q, k, v, dout = problem(rng, *shape)
    out, lse, _ = flashc.flash_attn_func(q, k, v, causal=causal, return_attn_probs=True)
    dq, dk, dv = flashc.flash_attn_backward(dout, q, k, v, out, lse, causal=causal)
    want = ref.attn_bwd(dout, q, k, v, causal=causal)
    for got, w, t, name in zip((dq, dk, dv), want, (q, k, v), ("dq", "dk", "dv")):
        assert got.shape == t.shape and got.dtype == np.float32, name
        assert_grad_close(got, w, name)


def test_backward_rows_without_keys_give_zero_dq(c_backward, rng):
    q, k, v, dout = problem(rng, 1, 7, 3, 2, 2, 8)
    out, lse, _ = flashc.flash_attn_func(q, k, v, causal=True, return_attn_probs=True)
    dq, dk, dv = flashc.flash_attn_backward(dout, q, k, v, out, lse, causal=True)
    # rows 0..3 see no key (i + Sk - Sq < 0)
    assert np.all(dq[:, :4] == 0.0)
    for got, w, name in zip((dq, dk, dv), ref.attn_bwd(dout, q, k, v, causal=True), "qkv"):
        assert_grad_close(got, w, "d" + name)


@pytest.mark.parametrize("scale", [0.37, -0.37])
def test_backward_softmax_scale(c_backward, rng, scale):
    q, k, v, dout = problem(rng, 2, 11, 17, 4, 1, 32)
    try:
        out, lse, _ = flashc.flash_attn_func(q, k, v, softmax_scale=scale, causal=True, return_attn_probs=True)
    except NotImplementedError:  # a negative scale refused by the forward (see test_attention)
        assert scale < 0
        return
    got = flashc.flash_attn_backward(dout, q, k, v, out, lse, softmax_scale=scale, causal=True)
    for g, w, name in zip(got, ref.attn_bwd(dout, q, k, v, scale=scale, causal=True), "qkv"):
        assert_grad_close(g, w, "d" + name)


def test_backward_non_contiguous(c_backward, rng):
    b, sq, sk, hq, hkv, d = 2, 13, 19, 4, 2, 24
    q = randn(rng, b, hq, sq, d).transpose(0, 2, 1, 3)
    k = randn(rng, b, hkv, sk, d).transpose(0, 2, 1, 3)
    v = randn(rng, b, sk, hkv, 2 * d)[..., ::2]
    dout = randn(rng, b, hq, sq, d).transpose(0, 2, 1, 3)
    out, lse, _ = flashc.flash_attn_func(q, k, v, return_attn_probs=True)
    out_t = np.ascontiguousarray(out.transpose(0, 2, 1, 3)).transpose(0, 2, 1, 3)  # strided out
    got = flashc.flash_attn_backward(dout, q, k, v, out_t, lse)
    for g, w, name in zip(got, ref.attn_bwd(dout, q, k, v), "qkv"):
        assert_grad_close(g, w, "d" + name)
    # dout broadcast with zero strides (what out.sum().backward() hands over)
    ones = np.broadcast_to(np.float32(1.0), q.shape)
    got = flashc.flash_attn_backward(ones, q, k, v, out, lse)
    for g, w, name in zip(got, ref.attn_bwd(np.ones(q.shape), q, k, v), "qkv"):
        assert_grad_close(g, w, "d" + name + " (broadcast dout)")


def test_backward_deterministic_and_inputs_unchanged(c_backward, rng):
    q, k, v, dout = problem(rng, 2, 31, 45, 6, 2, 40)
    out, lse, _ = flashc.flash_attn_func(q, k, v, causal=True, return_attn_probs=True)
    before = [t.copy() for t in (q, k, v, dout, out, lse)]
    try:
        flashc.set_num_threads(1)
        one = flashc.flash_attn_backward(dout, q, k, v, out, lse, causal=True)
        flashc.set_num_threads(2)
        two = flashc.flash_attn_backward(dout, q, k, v, out, lse, causal=True)
    finally:
        flashc.set_num_threads(0)  # back to OpenMP's default
    for a, b_ in zip(one, two):
        assert np.array_equal(a, b_), "backward differs between 1 and 2 threads"
    for t, t0 in zip((q, k, v, dout, out, lse), before):
        assert np.array_equal(t, t0)


def test_backward_lse_shape_error(c_backward, rng):
    q, k, v, dout = problem(rng, 1, 5, 6, 2, 2, 8)
    out, lse, _ = flashc.flash_attn_func(q, k, v, return_attn_probs=True)
    with pytest.raises(ValueError, match="lse") as e:
        flashc.flash_attn_backward(dout, q, k, v, out, lse[:, :1])
    assert e.value.detail == flashc.last_error()


def test_backward_shape_errors_come_from_the_library(rng):
    # validation precedes the backend, so this holds with or without the C backward
    q, k, v, dout = problem(rng, 1, 5, 6, 2, 2, 8)
    out, lse, _ = flashc.flash_attn_func(q, k, v, return_attn_probs=True)
    with pytest.raises(ValueError, match="dout.shape") as e:
        flashc.flash_attn_backward(dout[:, :4], q, k, v, out, lse)
    assert isinstance(e.value, flashc.FlashcError) and e.value.detail in str(e.value)


def test_missing_backward_is_not_implemented(rng):
    """While the library lacks a backward, the binding says so as NotImplementedError with the
    library's detail; once it has one, the result is checked against the reference."""
    q, k, v, dout = problem(rng, 1, 4, 5, 2, 1, 8)
    out, lse, _ = flashc.flash_attn_func(q, k, v, return_attn_probs=True)
    try:
        got = flashc.flash_attn_backward(dout, q, k, v, out, lse)
    except NotImplementedError as e:
        assert isinstance(e, flashc.FlashcError) and e.status == _lib.ERR_UNSUPPORTED
        assert e.detail.startswith("flashc_attn_bwd") and e.detail in str(e)
        return
    for g, w, name in zip(got, ref.attn_bwd(dout, q, k, v), "qkv"):
        assert_grad_close(g, w, "d" + name)
