"""rms_norm and swiglu on numpy arrays against float64 references."""

import numpy as np
import pytest

import flashc
import flashc_reference as ref


def randn(rng, *shape, dtype=np.float32):
    return rng.standard_normal(shape).astype(dtype)


@pytest.mark.parametrize("shape", [(1, 1), (7, 33), (3, 5, 64), (2, 3, 4, 17), (129,)])
def test_rms_norm(rng, shape):
    x = randn(rng, *shape) * 3.0
    w = randn(rng, shape[-1])
    for eps in (1e-6, 0.5):
        y = flashc.rms_norm(x, w, eps=eps)
        assert y.shape == x.shape and y.dtype == np.float32
        np.testing.assert_allclose(y, ref.rms_norm(x, w, eps), rtol=1e-5, atol=1e-6)


def test_rms_norm_strided(rng):
    big = randn(rng, 9, 80)
    x = big[::2, 5:69]  # row stride 160, column stride 1
    xt = randn(rng, 40, 12).T  # column stride 12: rows are strided
    w = randn(rng, 128)[::2]
    np.testing.assert_allclose(flashc.rms_norm(x, w), ref.rms_norm(x, w, 1e-6), rtol=1e-5, atol=1e-6)
    w40 = randn(rng, 40)
    np.testing.assert_allclose(flashc.rms_norm(xt, w40), ref.rms_norm(xt, w40, 1e-6), rtol=1e-5, atol=1e-6)


def test_rms_norm_residual_returns_out_and_new_residual(rng):
    x, r = randn(rng, 4, 6, 48), randn(rng, 4, 6, 48)
    w = randn(rng, 48)
    x0, r0 = x.copy(), r.copy()
    y, h = flashc.rms_norm(x, w, eps=1e-5, residual=r)
    # the caller's arrays are untouched; h is new
    assert np.array_equal(x, x0) and np.array_equal(r, r0)
    assert not np.shares_memory(h, x) and h.shape == x.shape and h.dtype == x.dtype
    # h = x + r in float32 (one correctly rounded add per element, as numpy does)
    assert np.array_equal(h, x + r)
    np.testing.assert_allclose(y, ref.rms_norm(x.astype(np.float64) + r, w, 1e-5), rtol=1e-5, atol=1e-6)


def test_rms_norm_residual_strided_views(rng):
    x = randn(rng, 10, 30)[:, ::3]
    r = randn(rng, 10, 20)[:, 5:15]
    w = randn(rng, 10)
    y, h = flashc.rms_norm(x, w, residual=r)
    assert np.array_equal(h, x + r)
    np.testing.assert_allclose(y, ref.rms_norm(h, w, 1e-6), rtol=1e-5, atol=1e-6)


def test_rms_norm_float16(rng):
    x, w = randn(rng, 5, 40, dtype=np.float16), randn(rng, 40, dtype=np.float16)
    y = flashc.rms_norm(x, w)
    assert y.dtype == np.float16
    # fp32 arithmetic, one fp16 rounding of y (2^-11 relative) plus w's product
    np.testing.assert_allclose(y.astype(np.float64), ref.rms_norm(x, w, 1e-6), rtol=2e-3, atol=2e-3)


def test_rms_norm_errors(rng):
    x = randn(rng, 3, 8)
    with pytest.raises(ValueError, match="w has 7 elements") as e:
        flashc.rms_norm(x, randn(rng, 7))
    assert e.value.detail == flashc.last_error()
    with pytest.raises(ValueError, match="eps"):
        flashc.rms_norm(x, randn(rng, 8), eps=-1.0)
    with pytest.raises(TypeError, match="w is float16 but x is float32"):
        flashc.rms_norm(x, randn(rng, 8, dtype=np.float16))
    with pytest.raises(ValueError, match="residual has shape"):
        flashc.rms_norm(x, randn(rng, 8), residual=randn(rng, 3, 9))
    with pytest.raises(ValueError, match=r"expected \(D,\)"):
        flashc.rms_norm(x, randn(rng, 1, 8))
    with pytest.raises(TypeError, match="float64"):
        flashc.rms_norm(x.astype(np.float64), randn(rng, 8).astype(np.float64))


@pytest.mark.parametrize("shape", [(1, 2), (7, 66), (3, 5, 128), (302,)])
def test_swiglu(rng, shape):
    gu = randn(rng, *shape) * 4.0
    out = flashc.swiglu(gu)
    assert out.shape == shape[:-1] + (shape[-1] // 2,) and out.dtype == np.float32
    np.testing.assert_allclose(out, ref.swiglu(gu), rtol=1e-5, atol=1e-6)


def test_swiglu_strided_and_unchanged(rng):
    gu = randn(rng, 12, 100)[1::3, 10:90]
    gu0 = gu.copy()
    np.testing.assert_allclose(flashc.swiglu(gu), ref.swiglu(gu), rtol=1e-5, atol=1e-6)
    assert np.array_equal(gu, gu0)


def test_swiglu_errors(rng):
    with pytest.raises(ValueError, match="even") as e:
        flashc.swiglu(randn(rng, 3, 7))
    assert isinstance(e.value, flashc.FlashcError) and e.value.detail in str(e.value)
    with pytest.raises(ValueError, match="even"):
        flashc.swiglu(randn(rng, 3, 1))
    with pytest.raises(TypeError, match="int64"):
        flashc.swiglu(np.ones((2, 4), np.int64))
