"""torch tensors: CPU forward/backward/autograd, row ops, and CUDA (bf16/fp16) when the device and
the library's CUDA backend are there. Skipped as a whole without torch."""

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import flashc  # noqa: E402
import flashc_reference as ref  # noqa: E402
from conftest import c_backward_missing  # noqa: E402
from flashc import _lib  # noqa: E402

LOWP = {"bfloat16": torch.bfloat16, "float16": torch.float16}


def tt(x, device="cpu", dtype=None, requires_grad=False):
    t = torch.from_numpy(np.ascontiguousarray(x)).to(device=device, dtype=dtype)
    return t.requires_grad_(requires_grad)


def npy(t):
    return t.detach().to("cpu", torch.float64).numpy()


def randn(rng, *shape):
    return rng.standard_normal(shape).astype(np.float32)


def assert_grad_close(got, want, what):
    got = npy(got)
    assert np.all(np.isfinite(got)), f"{what}: non-finite values"
    scale = max(1.0, float(np.max(np.abs(want))))
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=2e-5 * scale, err_msg=what)


# ---- CPU -------------------------------------------------------------------------------------


@pytest.mark.parametrize("shape", [(1, 1, 1, 1, 1, 1), (2, 17, 13, 6, 2, 40), (1, 9, 4, 2, 1, 8)])
@pytest.mark.parametrize("causal", [False, True])
def test_cpu_forward(rng, shape, causal):
    b, sq, sk, hq, hkv, d = shape
    q, k, v = randn(rng, b, sq, hq, d), randn(rng, b, sk, hkv, d), randn(rng, b, sk, hkv, d)
    out, lse, none = flashc.flash_attn_func(tt(q), tt(k), tt(v), causal=causal, return_attn_probs=True)
    assert isinstance(out, torch.Tensor) and out.dtype == torch.float32 and out.device.type == "cpu"
    assert lse.shape == (b, hq, sq) and lse.dtype == torch.float32 and none is None
    want, want_lse = ref.attn_fwd(q, k, v, causal=causal)
    np.testing.assert_allclose(npy(out), want, rtol=2e-5, atol=2e-5)
    np.testing.assert_allclose(npy(lse), want_lse, rtol=1e-5, atol=1e-5)


def test_cpu_transposed_views_and_packed(rng):
    q = torch.randn(2, 4, 11, 24).transpose(1, 2)  # (B, S, H, D) view of (B, H, S, D)
    k = torch.randn(2, 2, 15, 24).transpose(1, 2)
    v = torch.randn(2, 15, 2, 48)[..., ::2]
    assert not (q.is_contiguous() or k.is_contiguous() or v.is_contiguous())
    out = flashc.flash_attn_func(q, k, v, causal=True)
    np.testing.assert_allclose(npy(out), ref.attn_fwd(npy(q), npy(k), npy(v), causal=True)[0], rtol=2e-5, atol=2e-5)
    qkv = torch.randn(2, 9, 3, 4, 16)
    out = flashc.flash_attn_qkvpacked_func(qkv)
    np.testing.assert_allclose(npy(out), ref.attn_fwd(*(npy(qkv[:, :, i]) for i in range(3)))[0], rtol=2e-5, atol=2e-5)
    kv = torch.randn(2, 14, 2, 1, 16)
    out = flashc.flash_attn_kvpacked_func(q[..., :16], kv, causal=True)
    want = ref.attn_fwd(npy(q[..., :16]), npy(kv[:, :, 0]), npy(kv[:, :, 1]), causal=True)[0]
    np.testing.assert_allclose(npy(out), want, rtol=2e-5, atol=2e-5)


def test_cpu_errors(rng):
    q = torch.randn(1, 4, 2, 8)
    with pytest.raises(TypeError, match="mixing numpy arrays and torch tensors"):
        flashc.flash_attn_func(q, q.numpy(), q)
    with pytest.raises(TypeError, match="torch.float64"):
        flashc.flash_attn_func(q.double(), q.double(), q.double())
    with pytest.raises(ValueError, match="not a multiple") as e:
        flashc.flash_attn_func(torch.randn(1, 4, 3, 8), q, q)
    assert e.value.detail == flashc.last_error()
    with pytest.raises(NotImplementedError, match="dropout_p"):
        flashc.flash_attn_func(q, q, q, dropout_p=0.1)


@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
def test_cpu_low_precision(rng, dtype):
    """The CPU backend computes bf16 and f16 storage (flashc.h): within 2x of a naive
    same-precision implementation's error against float64."""
    q, k, v = randn(rng, 1, 19, 4, 32), randn(rng, 1, 23, 2, 32), randn(rng, 1, 23, 2, 32)
    tq, tk, tv = (tt(a, dtype=LOWP[dtype]) for a in (q, k, v))
    assert flashc.attn_fwd_supported(tq, tk, tv), flashc.last_error()
    out, lse, _ = flashc.flash_attn_func(tq, tk, tv, causal=True, return_attn_probs=True)
    assert out.dtype == LOWP[dtype]
    q64, k64, v64 = (npy(t) for t in (tq, tk, tv))
    want, want_lse = ref.attn_fwd(q64, k64, v64, causal=True)
    naive = ref.attn_fwd_naive_lowp(q64, k64, v64, dtype, causal=True)
    err = np.max(np.abs(npy(out) - want))
    assert np.all(np.isfinite(npy(out))) and err <= 2 * np.max(np.abs(naive - want)), err
    np.testing.assert_allclose(npy(lse), want_lse, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("shape", [(2, 5, 7, 4, 2, 16), (1, 33, 17, 3, 1, 40), (1, 9, 4, 2, 2, 8)])
@pytest.mark.parametrize("causal", [False, True])
def test_cpu_autograd(c_backward, rng, shape, causal):
    b, sq, sk, hq, hkv, d = shape
    q, k, v, dout = randn(rng, b, sq, hq, d), randn(rng, b, sk, hkv, d), randn(rng, b, sk, hkv, d), randn(rng, b, sq, hq, d)
    tq, tk, tv = (tt(a, requires_grad=True) for a in (q, k, v))
    out, lse, _ = flashc.flash_attn_func(tq, tk, tv, causal=causal, return_attn_probs=True)
    assert out.requires_grad and not lse.requires_grad
    (out * tt(dout)).sum().backward()
    for t, w, name in zip((tq, tk, tv), ref.attn_bwd(dout, q, k, v, causal=causal), "qkv"):
        assert_grad_close(t.grad, w, "d" + name)


def test_cpu_autograd_packed_and_sum(c_backward, rng):
    qkv = tt(randn(rng, 2, 13, 3, 4, 24), requires_grad=True)
    flashc.flash_attn_qkvpacked_func(qkv, causal=True).sum().backward()  # zero-stride dout
    x = npy(qkv)
    want = ref.attn_bwd(np.ones((2, 13, 4, 24)), x[:, :, 0], x[:, :, 1], x[:, :, 2], causal=True)
    assert_grad_close(qkv.grad, np.stack(want, axis=2), "dqkv")

    q = tt(randn(rng, 1, 6, 4, 16), requires_grad=True)
    kv = tt(randn(rng, 1, 9, 2, 2, 16), requires_grad=True)
    scale = 0.3
    dout = randn(rng, 1, 6, 4, 16)
    out = flashc.flash_attn_kvpacked_func(q, kv, softmax_scale=scale)
    out.backward(tt(dout))
    k_, v_ = npy(kv)[:, :, 0], npy(kv)[:, :, 1]
    dq, dk, dv = ref.attn_bwd(dout, npy(q), k_, v_, scale=scale)
    assert_grad_close(q.grad, dq, "dq")
    assert_grad_close(kv.grad, np.stack([dk, dv], axis=2), "dkv")


def test_cpu_training_step_reduces_the_loss(c_backward):
    # the point of autograd: a few SGD steps on q, k, v toward a target output
    g = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(1, 8, 2, 16, generator=g).requires_grad_() for _ in range(3))
    target = torch.randn(1, 8, 2, 16, generator=g)
    opt = torch.optim.SGD([q, k, v], lr=0.5)
    losses = []
    for _ in range(20):
        opt.zero_grad()
        loss = ((flashc.flash_attn_func(q, k, v, causal=True) - target) ** 2).mean()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    assert losses[-1] < 0.9 * losses[0], losses


def test_cpu_autograd_reports_a_missing_backward(rng):
    """Without the C backward, backward() raises NotImplementedError with the library's detail;
    with it, the gradient is checked."""
    q, k, v = (tt(randn(rng, 1, 4, 2, 8), requires_grad=True) for _ in range(3))
    out = flashc.flash_attn_func(q, k, v)
    missing = c_backward_missing()
    if missing is not None:
        with pytest.raises(NotImplementedError) as e:
            out.sum().backward()
        assert missing in str(e.value)
    else:
        out.sum().backward()
        want = ref.attn_bwd(np.ones((1, 4, 2, 8)), npy(q), npy(k), npy(v))
        assert_grad_close(q.grad, want[0], "dq")


def test_cpu_no_grad_mode(rng):
    q = torch.randn(1, 5, 2, 8, requires_grad=True)
    with torch.no_grad():
        out = flashc.flash_attn_func(q, q.detach(), q.detach())
    assert not out.requires_grad


def test_cpu_flash_attn_backward_function(c_backward, rng):
    q, k, v, dout = randn(rng, 1, 7, 4, 8), randn(rng, 1, 5, 2, 8), randn(rng, 1, 5, 2, 8), randn(rng, 1, 7, 4, 8)
    out, lse, _ = flashc.flash_attn_func(tt(q), tt(k), tt(v), causal=True, return_attn_probs=True)
    grads = flashc.flash_attn_backward(tt(dout), tt(q), tt(k), tt(v), out, lse, causal=True)
    for g, w, name in zip(grads, ref.attn_bwd(dout, q, k, v, causal=True), "qkv"):
        assert isinstance(g, torch.Tensor)
        assert_grad_close(g, w, "d" + name)


def test_cpu_rms_norm_and_swiglu(rng):
    x, r, w = randn(rng, 3, 5, 40), randn(rng, 3, 5, 40), randn(rng, 40)
    tx, tr = tt(x), tt(r)
    y = flashc.rms_norm(tx, tt(w), eps=1e-5)
    np.testing.assert_allclose(npy(y), ref.rms_norm(x, w, 1e-5), rtol=1e-5, atol=1e-6)
    y, h = flashc.rms_norm(tx, tt(w), eps=1e-5, residual=tr)
    assert torch.equal(h, tx + tr) and torch.equal(tx, tt(x)) and h.data_ptr() != tx.data_ptr()
    np.testing.assert_allclose(npy(y), ref.rms_norm(npy(h), w, 1e-5), rtol=1e-5, atol=1e-6)
    gu = torch.randn(4, 7, 64)[..., ::2]  # strided rows
    np.testing.assert_allclose(npy(flashc.swiglu(gu)), ref.swiglu(npy(gu)), rtol=1e-5, atol=1e-6)
    # autograd (the fused backwards): gradients against torch's own autograd of the formulas
    xg, wg = tt(x, requires_grad=True), tt(w, requires_grad=True)
    flashc.rms_norm(xg, wg, eps=1e-5).square().sum().backward()
    x64, w64 = tt(x, dtype=torch.float64, requires_grad=True), tt(w, dtype=torch.float64, requires_grad=True)
    (x64 * torch.rsqrt(x64.square().mean(-1, keepdim=True) + 1e-5) * w64).square().sum().backward()
    np.testing.assert_allclose(npy(xg.grad), npy(x64.grad), rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(npy(wg.grad), npy(w64.grad), rtol=1e-4, atol=1e-4)


# ---- CUDA ------------------------------------------------------------------------------------

needs_cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="torch sees no CUDA device")


@pytest.fixture
def flashc_cuda():
    if not flashc.cuda_available():
        pytest.skip("this libflashc has no CUDA backend (or sees no device)")


@needs_cuda
def test_cuda_without_backend_is_not_implemented():
    if flashc.cuda_available():
        pytest.skip("this libflashc has a CUDA backend")
    q = torch.randn(1, 4, 2, 64, device="cuda", dtype=torch.bfloat16)
    with pytest.raises(NotImplementedError) as e:
        flashc.flash_attn_func(q, q, q)
    assert e.value.detail and "CUDA" in e.value.detail


def cuda_check(q, k, v, dtype, causal, scale=None):
    out, lse, _ = flashc.flash_attn_func(q, k, v, causal=causal, softmax_scale=scale, return_attn_probs=True)
    torch.cuda.synchronize()
    assert out.device == q.device and out.dtype == q.dtype and lse.dtype == torch.float32
    q64, k64, v64 = (npy(t) for t in (q, k, v))
    want, want_lse = ref.attn_fwd(q64, k64, v64, scale=scale, causal=causal)
    naive = ref.attn_fwd_naive_lowp(q64, k64, v64, dtype, scale=scale, causal=causal)
    got = npy(out)
    assert np.all(np.isfinite(got)), "NaN/inf in out"
    err, err_naive = np.max(np.abs(got - want)), np.max(np.abs(naive - want))
    assert err <= 2 * err_naive, f"max error {err} > 2x naive {dtype} error {err_naive}"
    fin = np.isfinite(want_lse)
    assert np.array_equal(np.isneginf(npy(lse)), ~fin)
    np.testing.assert_allclose(npy(lse)[fin], want_lse[fin], rtol=1e-3, atol=1e-3)


@needs_cuda
@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize(
    "shape", [(2, 128, 128, 8, 8, 64), (1, 77, 301, 8, 2, 128), (2, 200, 50, 4, 1, 64), (3, 1, 513, 16, 4, 128)]
)
def test_cuda_forward(flashc_cuda, rng, dtype, causal, shape):
    b, sq, sk, hq, hkv, d = shape
    mk = lambda *s: torch.from_numpy(randn(rng, *s)).to("cuda", LOWP[dtype])  # noqa: E731
    cuda_check(mk(b, sq, hq, d), mk(b, sk, hkv, d), mk(b, sk, hkv, d), dtype, causal)


@needs_cuda
@pytest.mark.parametrize("d", [1, 32, 40, 59, 80, 96, 160, 256, 264])
def test_cuda_other_head_dims(flashc_cuda, rng, d):
    """flashc.h: the CUDA forward serves head dims 1..256 (59: rows that are not 16-byte aligned)
    and refuses larger ones with the library's detail."""
    q, k, v = (torch.from_numpy(randn(rng, 1, 70, 4, d)).to("cuda", torch.bfloat16) for _ in range(3))
    if d <= 256:
        assert flashc.attn_fwd_supported(q, k, v), flashc.last_error()
        cuda_check(q, k, v, "bfloat16", True)
    else:
        assert not flashc.attn_fwd_supported(q, k, v)
        detail = flashc.last_error()
        assert "head dim" in detail or str(d) in detail, detail
        with pytest.raises((NotImplementedError, TypeError)) as e:
            flashc.flash_attn_func(q, k, v)
        assert detail in str(e.value)


@needs_cuda
def test_cuda_views_stream_and_scale(flashc_cuda, rng):
    side = torch.cuda.Stream()
    with torch.cuda.stream(side):
        # produced on the side stream: the kernel must run on it (current stream) to see them
        base_q = torch.randn(2, 8, 300, 64, device="cuda", dtype=torch.bfloat16)
        q = base_q.transpose(1, 2)  # (B, S, H, D) view, strides (H*S*D, D, S*D, 1)
        kv = torch.randn(2, 300, 2, 4, 64, device="cuda", dtype=torch.bfloat16)
        k, v = kv[:, :, 0], kv[:, :, 1]
        assert not q.is_contiguous() and not k.is_contiguous()
        cuda_check(q, k, v, "bfloat16", True, scale=0.2)
        cuda_check(q.contiguous(), k.contiguous(), v.contiguous(), "bfloat16", True, scale=0.2)


@needs_cuda
def test_cuda_layouts_the_kernel_refuses_are_copied(flashc_cuda, rng):
    n = 1 * 90 * 4 * 64
    q = torch.randn(n + 1, device="cuda", dtype=torch.float16)[1:].view(1, 90, 4, 64)  # 2-byte offset
    k = torch.randn(1, 90, 2, 64, device="cuda", dtype=torch.float16)
    v = torch.randn(1, 90, 2, 128, device="cuda", dtype=torch.float16)[..., ::2]  # headdim stride 2
    assert q.data_ptr() % 16 != 0 and v.stride(3) == 2
    cuda_check(q, k, v, "float16", True)


@needs_cuda
def test_cuda_float32_is_refused(flashc_cuda, rng):
    """flashc.h: the CUDA forward takes bf16/f16 storage only; float32 is refused clearly."""
    q = torch.randn(1, 33, 2, 64, device="cuda")
    assert not flashc.attn_fwd_supported(q, q, q)
    detail = flashc.last_error()
    assert "float32" in detail, detail
    with pytest.raises(TypeError) as e:
        flashc.flash_attn_func(q, q, q)
    assert detail in str(e.value)


def torch_lowp_grads(q, k, v, dout, causal):
    """Gradients of an unfused attention in q's dtype (torch eager: S, P materialised in
    bf16/fp16, GQA by expanding k and v): the same-precision naive of the 2x rule."""
    q, k, v = (t.detach().clone().requires_grad_() for t in (q, k, v))
    g = q.shape[2] // k.shape[2]
    kk, vv = (t.repeat_interleave(g, dim=2) for t in (k, v))
    s = torch.einsum("bqhd,bkhd->bhqk", q * q.shape[-1] ** -0.5, kk).float()
    sq, sk = q.shape[1], k.shape[1]
    mask = torch.ones(sq, sk, dtype=torch.bool, device=q.device)
    if causal:
        mask = mask.tril(sk - sq)
    # a row that sees no key gets P = 0 (and zero gradients), not softmax's NaN
    p = torch.softmax(s.masked_fill(~mask, -1e30), dim=-1) * mask.any(-1, keepdim=True)
    p = p.to(q.dtype)
    out = torch.einsum("bhqk,bkhd->bqhd", p, vv)
    out.backward(dout)
    return q.grad, k.grad, v.grad


@needs_cuda
@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize(
    "shape",
    [(2, 97, 130, 4, 2, 64), (1, 150, 70, 6, 1, 128),
     # head dims without an instance of their own (padded; 59 and 111 through 16-byte pitched
     # rows), and Dk != Dv (192 / 128: DeepSeek's; 40 / 72; 59 / 72, whose forward goes through
     # pitched rows too)
     (1, 77, 90, 4, 2, 40), (1, 70, 66, 4, 1, 59), (2, 50, 64, 2, 2, 160), (1, 33, 47, 2, 1, 111),
     (1, 90, 120, 4, 2, 192, 128), (1, 61, 80, 2, 1, 40, 72), (1, 61, 80, 2, 1, 59, 72)],
)
def test_cuda_backward_autograd(flashc_cuda, rng, dtype, causal, shape):
    """CUDA autograd through flashc_attn_bwd (GQA/MQA, Sq != Sk, fully masked rows when causal
    with Sq > Sk, every head dim, Dk != Dv): each gradient's max error against the float64
    reference at most 2x that of torch's unfused attention in the same dtype (plus one ulp at
    0.3), no NaN."""
    b, sq, sk, hq, hkv, d = shape[:6]
    dv = shape[6] if len(shape) > 6 else d
    mk = lambda *s: torch.from_numpy(randn(rng, *s)).to("cuda", LOWP[dtype])  # noqa: E731
    q, k, v = mk(b, sq, hq, d).requires_grad_(), mk(b, sk, hkv, d).requires_grad_(), mk(b, sk, hkv, dv).requires_grad_()
    dout = mk(b, sq, hq, dv)
    out = flashc.flash_attn_func(q, k, v, causal=causal)
    out.backward(dout)
    want = ref.attn_bwd(npy(dout), npy(q), npy(k), npy(v), causal=causal)
    naive = torch_lowp_grads(q, k, v, dout, causal)
    floor = 2.0 ** -9 if dtype == "bfloat16" else 2.0 ** -12
    for t, w, n, name in zip((q, k, v), want, naive, "qkv"):
        got = npy(t.grad)
        assert t.grad.dtype == t.dtype and np.all(np.isfinite(got)), name
        err, err_naive = np.max(np.abs(got - w)), np.max(np.abs(npy(n) - w))
        assert err <= 2 * err_naive + floor, f"d{name}: error {err} > 2x naive {err_naive}"


@needs_cuda
def test_cuda_backward_packed_and_deterministic(flashc_cuda, rng):
    """qkvpacked / kvpacked autograd on CUDA matches the unpacked call; deterministic=True gives
    bit-identical gradients over repeated runs."""
    qkv = torch.from_numpy(randn(rng, 2, 300, 3, 4, 64)).to("cuda", torch.bfloat16).requires_grad_()
    dout = torch.from_numpy(randn(rng, 2, 300, 4, 64)).to("cuda", torch.bfloat16)
    grads = []
    for _ in range(3):
        qkv.grad = None
        flashc.flash_attn_qkvpacked_func(qkv, causal=True, deterministic=True).backward(dout)
        grads.append(qkv.grad.clone())
    assert all(torch.equal(grads[0], g) for g in grads[1:])
    q, k, v = (qkv.detach()[:, :, i].clone().requires_grad_() for i in range(3))
    flashc.flash_attn_func(q, k, v, causal=True, deterministic=True).backward(dout)
    assert torch.equal(torch.stack([q.grad, k.grad, v.grad], dim=2), grads[0])
    kv = qkv.detach()[:, :, 1:].clone().requires_grad_()
    q2 = qkv.detach()[:, :, 0].clone().requires_grad_()
    flashc.flash_attn_kvpacked_func(q2, kv, causal=True, deterministic=True).backward(dout)
    assert torch.equal(q2.grad, q.grad) and torch.equal(kv.grad, grads[0][:, :, 1:])


def _varlen_lowp_naive(q, k, v, dout, cu_q, cu_k, causal):
    """torch_lowp_grads sequence by sequence over packed rows (zeros where a sequence is empty
    and on the rows of no sequence)."""
    gq, gk, gv = torch.zeros_like(q), torch.zeros_like(k), torch.zeros_like(v)
    for b in range(len(cu_q) - 1):
        q0, q1, k0, k1 = cu_q[b], cu_q[b + 1], cu_k[b], cu_k[b + 1]
        if q1 == q0 or k1 == k0:
            continue
        g = torch_lowp_grads(q[None, q0:q1], k[None, k0:k1], v[None, k0:k1], dout[None, q0:q1], causal)
        gq[q0:q1], gk[k0:k1], gv[k0:k1] = g[0][0], g[1][0], g[2][0]
    return gq, gk, gv


@needs_cuda
@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("heads", [(4, 4), (8, 2), (8, 1)])
@pytest.mark.parametrize("d", [64, 128, 40])
def test_cuda_varlen_backward_autograd(flashc_cuda, rng, dtype, causal, heads, d):
    """flash_attn_varlen_func autograd on CUDA through the CUDA varlen backward: ragged lengths
    with empty sequences, Sq != Sk per sequence, rows of no sequence past cu_seqlens[-1] (zero
    gradients); each gradient within 2x the error of torch's unfused attention in the same dtype
    (plus one ulp at 0.3) against the float64 reference, no NaN."""
    hq, hkv = heads
    lq, lk = [0, 130, 1, 70, 200, 0, 9], [5, 130, 0, 150, 90, 0, 260]
    cu_q, cu_k = np.concatenate([[0], np.cumsum(lq)]), np.concatenate([[0], np.cumsum(lk)])
    tq, tk = int(cu_q[-1]) + 7, int(cu_k[-1]) + 3
    mk = lambda *s: torch.from_numpy(randn(rng, *s)).to("cuda", LOWP[dtype])  # noqa: E731
    q, k, v = mk(tq, hq, d).requires_grad_(), mk(tk, hkv, d).requires_grad_(), mk(tk, hkv, d).requires_grad_()
    dout = mk(tq, hq, d)
    cq = torch.tensor(cu_q, dtype=torch.int32, device="cuda")
    ck = torch.tensor(cu_k, dtype=torch.int32, device="cuda")
    out = flashc.flash_attn_varlen_func(q, k, v, cq, ck, max(lq), max(lk), causal=causal)
    out.backward(dout)
    want = ref.attn_varlen_bwd(npy(dout), npy(q), npy(k), npy(v), cu_q, cu_k, causal=causal)
    naive = _varlen_lowp_naive(q.detach(), k.detach(), v.detach(), dout, cu_q, cu_k, causal)
    floor = 2.0 ** -9 if dtype == "bfloat16" else 2.0 ** -12
    for t, w, n, name in zip((q, k, v), want, naive, "qkv"):
        got = npy(t.grad)
        assert t.grad.dtype == t.dtype and np.all(np.isfinite(got)), name
        tail = cu_q[-1] if name == "q" else cu_k[-1]
        assert np.all(got[tail:] == 0), f"d{name}: rows of no sequence not zero"
        err, err_naive = np.max(np.abs(got - w)), np.max(np.abs(npy(n) - w))
        assert err <= 2 * err_naive + floor, f"d{name}: error {err} > 2x naive {err_naive}"


@needs_cuda
def test_cuda_varlen_backward_packed_and_deterministic(flashc_cuda, rng):
    """varlen qkvpacked / kvpacked autograd on CUDA match the unpacked call; deterministic=True
    gives bit-identical gradients over repeated runs."""
    lens = [300, 0, 517, 64]
    cu = torch.tensor(np.concatenate([[0], np.cumsum(lens)]), dtype=torch.int32, device="cuda")
    t = int(sum(lens)) + 5
    qkv = torch.from_numpy(randn(rng, t, 3, 4, 64)).to("cuda", torch.bfloat16).requires_grad_()
    dout = torch.from_numpy(randn(rng, t, 4, 64)).to("cuda", torch.bfloat16)
    grads = []
    for _ in range(3):
        qkv.grad = None
        flashc.flash_attn_varlen_qkvpacked_func(qkv, cu, max(lens), causal=True,
                                                deterministic=True).backward(dout)
        grads.append(qkv.grad.clone())
    assert all(torch.equal(grads[0], g) for g in grads[1:])
    assert torch.all(grads[0][sum(lens):] == 0)
    q, k, v = (qkv.detach()[:, i].clone().requires_grad_() for i in range(3))
    flashc.flash_attn_varlen_func(q, k, v, cu, cu, max(lens), max(lens), causal=True,
                                  deterministic=True).backward(dout)
    assert torch.equal(torch.stack([q.grad, k.grad, v.grad], dim=1), grads[0])
    kv = qkv.detach()[:, 1:].clone().requires_grad_()
    q2 = qkv.detach()[:, 0].clone().requires_grad_()
    flashc.flash_attn_varlen_kvpacked_func(q2, kv, cu, cu, max(lens), max(lens), causal=True,
                                           deterministic=True).backward(dout)
    assert torch.equal(q2.grad, q.grad) and torch.equal(kv.grad, grads[0][:, 1:])


@needs_cuda
def test_cuda_row_ops_run_on_the_gpu():
    """RMSNorm and SwiGLU on CUDA tensors run on the device (src/cuda/rows.cu) where the library
    has its CUDA backend, and match the float64 formulas."""
    if not flashc.cuda_available():
        pytest.skip("this libflashc has no CUDA backend")
    x = torch.randn(4, 64, device="cuda")
    w = torch.randn(64, device="cuda")
    y = flashc.rms_norm(x, w)
    assert y.device == x.device
    np.testing.assert_allclose(npy(y), ref.rms_norm(npy(x), npy(w), 1e-6), rtol=1e-4, atol=1e-4)
    gu = torch.randn(3, 2 * 40, device="cuda")
    np.testing.assert_allclose(npy(flashc.swiglu(gu)), ref.swiglu(npy(gu)), rtol=1e-4, atol=1e-5)


@needs_cuda
@pytest.mark.skipif(not torch.cuda.is_available() or torch.cuda.device_count() < 2, reason="needs 2 GPUs")
def test_cuda_second_device(flashc_cuda, rng):
    q, k, v = (torch.from_numpy(randn(rng, 1, 100, 4, 64)).to("cuda:1", torch.bfloat16) for _ in range(3))
    assert torch.cuda.current_device() == 0
    cuda_check(q, k, v, "bfloat16", True)
