"""apply_rotary_emb (flash_attn.layers.rotary's signature), the fused backwards
(rms_norm_backward, swiglu_backward) and autograd through them: numpy against float64
formulas, torch against torch's own autograd of the same formulas (CPU, and CUDA in bf16 when
the library has its CUDA backend)."""

import numpy as np
import pytest

import flashc


def randn(rng, *shape):
    return rng.standard_normal(shape).astype(np.float32)


def tables(seqlen, rd, theta=10000.0):
    inv = theta ** (-np.arange(0, rd, 2, dtype=np.float64) / rd)
    ang = np.arange(seqlen, dtype=np.float64)[:, None] * inv[None, :]
    return np.cos(ang).astype(np.float32), np.sin(ang).astype(np.float32)


def rotary_ref(x, cos, sin, interleaved, offsets):
    """flash-attn's apply_rotary_emb_torch in float64 numpy; offsets (B,) ints."""
    x = x.astype(np.float64)
    B, S = x.shape[:2]
    rd = 2 * cos.shape[-1]
    out = x.copy()
    for b in range(B):
        c = cos[offsets[b]:offsets[b] + S].astype(np.float64)[:, None, :]
        s = sin[offsets[b]:offsets[b] + S].astype(np.float64)[:, None, :]
        xr = x[b, :, :, :rd]
        if interleaved:
            x0, x1 = xr[..., ::2], xr[..., 1::2]
            out[b, :, :, :rd:2] = x0 * c - x1 * s
            out[b, :, :, 1:rd:2] = x1 * c + x0 * s
        else:
            h = rd // 2
            x0, x1 = xr[..., :h], xr[..., h:]
            out[b, :, :, :h] = x0 * c - x1 * s
            out[b, :, :, h:rd] = x1 * c + x0 * s
    return out


@pytest.mark.parametrize("interleaved", [False, True])
@pytest.mark.parametrize("rd_frac", [1.0, 0.5])
def test_rotary_numpy(rng, interleaved, rd_frac):
    B, S, H, D = 2, 37, 3, 64
    rd = int(D * rd_frac)
    cos, sin = tables(S + 20, rd)
    x = randn(rng, B, S, H, D)
    x0 = x.copy()
    out = flashc.apply_rotary_emb(x, cos, sin, interleaved=interleaved)
    assert np.array_equal(x, x0) and out.shape == x.shape and out.dtype == x.dtype
    np.testing.assert_allclose(out, rotary_ref(x, cos, sin, interleaved, [0, 0]), rtol=2e-6, atol=2e-6)
    assert np.array_equal(out[..., rd:], x[..., rd:])
    # offsets: an int, and one per sequence
    out = flashc.apply_rotary_emb(x, cos, sin, interleaved=interleaved, seqlen_offsets=5)
    np.testing.assert_allclose(out, rotary_ref(x, cos, sin, interleaved, [5, 5]), rtol=2e-6, atol=2e-6)
    offs = np.array([3, 11], dtype=np.int32)
    out = flashc.apply_rotary_emb(x, cos, sin, interleaved=interleaved, seqlen_offsets=offs)
    np.testing.assert_allclose(out, rotary_ref(x, cos, sin, interleaved, offs), rtol=2e-6, atol=2e-6)
    # in place returns x itself, rotated
    y = x.copy()
    r = flashc.apply_rotary_emb(y, cos, sin, interleaved=interleaved, inplace=True)
    assert r is y
    np.testing.assert_allclose(y, rotary_ref(x, cos, sin, interleaved, [0, 0]), rtol=2e-6, atol=2e-6)


def test_rotary_varlen_numpy(rng):
    H, D = 2, 16
    cu = np.array([0, 5, 12, 13], dtype=np.int32)
    cos, sin = tables(40, D)
    x = randn(rng, 13, H, D)
    out = flashc.apply_rotary_emb(x, cos, sin, cu_seqlens=cu, max_seqlen=7, seqlen_offsets=2)
    for b in range(3):
        seg = x[cu[b]:cu[b + 1]][None]
        want = rotary_ref(seg, cos, sin, False, [2])[0]
        np.testing.assert_allclose(out[cu[b]:cu[b + 1]], want, rtol=2e-6, atol=2e-6)


def test_rotary_refuses_short_tables(rng):
    cos, sin = tables(10, 8)
    with pytest.raises(ValueError):
        flashc.apply_rotary_emb(randn(rng, 1, 12, 1, 8), cos, sin)


def test_backwards_numpy(rng):
    T, D = 9, 48
    x, w, dy, dres = randn(rng, T, D), randn(rng, D), randn(rng, T, D), randn(rng, T, D)
    eps = 1e-5
    dx, dw = flashc.rms_norm_backward(dy, x, w, eps, dresidual=dres)
    x64, w64, g64 = x.astype(np.float64), w.astype(np.float64), dy.astype(np.float64)
    rstd = 1.0 / np.sqrt((x64 ** 2).mean(-1, keepdims=True) + eps)
    g = g64 * w64
    want_dx = rstd * (g - x64 * rstd ** 2 * (g * x64).mean(-1, keepdims=True)) + dres
    np.testing.assert_allclose(dx, want_dx, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(dw, (g64 * x64 * rstd).sum(0), rtol=1e-5, atol=1e-5)
    gu, do = randn(rng, 3, 5, 2 * 33) * 3, randn(rng, 3, 5, 33)
    d = flashc.swiglu_backward(do, gu)
    gg, uu = gu[..., :33].astype(np.float64), gu[..., 33:].astype(np.float64)
    s = 1.0 / (1.0 + np.exp(-gg))
    np.testing.assert_allclose(d[..., :33], do * uu * s * (1 + gg * (1 - s)), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(d[..., 33:], do * gg * s, rtol=1e-5, atol=1e-5)


# ---- torch autograd --------------------------------------------------------------------------


def _torch():
    return pytest.importorskip("torch")


def _devices():
    torch = pytest.importorskip("torch")
    devs = ["cpu"]
    if torch.cuda.is_available() and flashc.cuda_available():
        devs.append("cuda")
    return devs


@pytest.mark.parametrize("dev", ["cpu", "cuda"])
def test_torch_autograd(rng, dev):
    torch = _torch()
    if dev not in _devices():
        pytest.skip("no CUDA device or no CUDA backend")
    dt = torch.float32 if dev == "cpu" else torch.bfloat16
    tol = 1e-4 if dev == "cpu" else 3e-2

    def leaf(a, dtype=dt):
        return torch.from_numpy(a).to(dev, dtype).requires_grad_()

    def ref_leaf(t):
        return t.detach().to(torch.float64).requires_grad_()

    def close(a, b, what):
        a, b = a.detach().double().cpu(), b.detach().double().cpu()
        scale = max(1.0, b.abs().max().item())
        assert torch.allclose(a, b, rtol=tol, atol=tol * scale), f"{what}: max diff {(a - b).abs().max().item()}"

    # rms_norm with residual: gradients into x, residual and weight, h's own gradient too
    x, r, w = leaf(randn(rng, 3, 7, 256)), leaf(randn(rng, 3, 7, 256)), leaf(randn(rng, 256))
    y, h = flashc.rms_norm(x, w, eps=1e-5, residual=r)
    (y.float().square().sum() + h.float().sum()).backward()
    xr, rr, wr = ref_leaf(x), ref_leaf(r), ref_leaf(w)
    hr = xr + rr
    yr = hr * torch.rsqrt(hr.square().mean(-1, keepdim=True) + 1e-5) * wr
    (yr.square().sum() + hr.sum()).backward()
    close(x.grad, xr.grad, "rms_norm dx"), close(r.grad, rr.grad, "rms_norm dresidual")
    close(w.grad, wr.grad, "rms_norm dw")
    # swiglu
    gu = leaf(randn(rng, 5, 2 * 96) * 2)
    flashc.swiglu(gu).float().square().sum().backward()
    gr = ref_leaf(gu)
    g, u = gr.chunk(2, -1)
    (torch.nn.functional.silu(g) * u).square().sum().backward()
    close(gu.grad, gr.grad, "swiglu dgu")
    # apply_rotary_emb: gradient of sum(out * c) is the inverse rotation of c
    B, S, H, D = 2, 20, 4, 64
    cos, sin = (torch.from_numpy(t).to(dev) for t in tables(S + 8, D))
    q = leaf(randn(rng, B, S, H, D))
    c = torch.from_numpy(randn(rng, B, S, H, D)).to(dev, dt)
    offs = torch.tensor([0, 8], device=dev, dtype=torch.int32)
    out = flashc.apply_rotary_emb(q, cos, sin, interleaved=True, seqlen_offsets=offs)
    (out.float() * c.float()).sum().backward()
    qr = ref_leaf(q)
    want = torch.from_numpy(rotary_ref(qr.detach().cpu().numpy(), cos.cpu().numpy(), sin.cpu().numpy(), True, [0, 8]))
    close(out, want, "rotary out")
    # the gradient: rotation by -angle, i.e. the reference with sin negated
    cn = c.double().cpu().numpy()
    gwant = torch.from_numpy(rotary_ref(cn, cos.cpu().numpy(), -sin.cpu().numpy(), True, [0, 8]))
    close(q.grad, gwant, "rotary dq")
