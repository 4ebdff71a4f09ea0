"""flash_attn_with_kvcache and flash_attn_varlen_func on CUDA tensors (issue 13): against a
float64 torch reference on the same inputs, within a few ulps of the storage type.

Runs under pytest (skipped without torch or a CUDA device), and without pytest too (the GPU
image has none): `python3 python/tests/test_cuda_serving.py` calls every test_* function and
prints one line each.
"""

import math
import os
import sys

_PKG_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if _PKG_ROOT not in sys.path:
    sys.path.insert(0, _PKG_ROOT)

import flashc  # noqa: E402

try:
    import torch
except ImportError:  # pragma: no cover
    torch = None

try:
    import pytest

    needs_cuda = pytest.mark.skipif(
        torch is None or not torch.cuda.is_available() or not flashc.cuda_available(),
        reason="needs torch with CUDA and a CUDA build of libflashc",
    )
except ImportError:  # the bare runner below
    pytest = None

    def needs_cuda(f):
        return f


def _ref(q, k, v, causal=False, window=(-1, -1), softcap=0.0):
    """q (Sq, Hq, D), k/v (Sk, Hkv, D) of one sequence -> o (Sq, Hq, Dv), lse (Hq, Sq), float64."""
    sq, hq, _ = q.shape
    sk, hkv, _ = k.shape
    g = hq // hkv
    qd, kd, vd = q.double(), k.double().repeat_interleave(g, 1), v.double().repeat_interleave(g, 1)
    s = torch.einsum("qhd,khd->hqk", qd, kd) / math.sqrt(q.shape[-1])
    if softcap > 0:
        s = softcap * torch.tanh(s / softcap)
    i = torch.arange(sq, device=q.device)[:, None] + sk - sq
    j = torch.arange(sk, device=q.device)[None, :]
    wl, wr = window
    if causal:
        wr = 0
    ok = torch.ones(sq, sk, dtype=torch.bool, device=q.device)
    if wl >= 0:
        ok &= j >= i - wl
    if wr >= 0:
        ok &= j <= i + wr
    s = s.masked_fill(~ok, -math.inf)
    lse = torch.logsumexp(s, -1)
    p = torch.exp(s - lse[..., None]).nan_to_num(0.0)
    o = torch.einsum("hqk,khd->qhd", p, vd)
    return o, lse


def _close(got, want, dtype, what):
    tol = (2.0 ** -7 if dtype == torch.bfloat16 else 2.0 ** -10) * (want.abs().max().item() + 1e-3)
    err = (got.double() - want).abs().max().item()
    assert err <= 4 * tol, f"{what}: max err {err:.3g} > {4 * tol:.3g}"
    return err


@needs_cuda
def test_kvcache_paged_append_gqa():
    torch.manual_seed(1)
    for dtype in (torch.bfloat16, torch.float16):
        B, Hq, Hkv, D, page, max_pages = 3, 16, 4, 128, 16, 12
        npages = B * max_pages + 2
        kc = torch.randn(npages, page, Hkv, D, dtype=dtype, device="cuda")
        vc = torch.randn(npages, page, Hkv, D, dtype=dtype, device="cuda")
        table = torch.randperm(npages, device="cuda")[: B * max_pages].view(B, max_pages).int()
        seqlens = torch.tensor([150, 7, 100], dtype=torch.int32, device="cuda")
        q = torch.randn(B, 2, Hq, D, dtype=dtype, device="cuda")
        kn = torch.randn(B, 2, Hkv, D, dtype=dtype, device="cuda")
        vn = torch.randn(B, 2, Hkv, D, dtype=dtype, device="cuda")
        out, lse = flashc.flash_attn_with_kvcache(
            q, kc, vc, kn, vn, cache_seqlens=seqlens, block_table=table, causal=True,
            num_splits=3, return_softmax_lse=True)
        torch.cuda.synchronize()
        for b in range(B):
            n = int(seqlens[b]) + 2
            rows = torch.arange(n, device="cuda")
            pg = table[b, rows // page].long()
            k = kc[pg, rows % page]
            v = vc[pg, rows % page]
            assert torch.equal(k[-2:], kn[b]) and torch.equal(v[-2:], vn[b]), "append in place"
            o_ref, l_ref = _ref(q[b], k, v, causal=True)
            _close(out[b], o_ref, dtype, f"kvcache {dtype} b={b}")
            assert (lse[b].double() - l_ref).abs().max().item() < 1e-3


@needs_cuda
def test_kvcache_contiguous_window_softcap():
    torch.manual_seed(2)
    dtype = torch.bfloat16
    B, Hq, Hkv, D, S = 2, 8, 8, 64, 300
    kc = torch.randn(B, S, Hkv, D, dtype=dtype, device="cuda")
    vc = torch.randn(B, S, Hkv, D, dtype=dtype, device="cuda")
    q = torch.randn(B, 1, Hq, D, dtype=dtype, device="cuda")
    out = flashc.flash_attn_with_kvcache(q, kc, vc, cache_seqlens=250, window_size=(60, -1),
                                         softcap=10.0)
    torch.cuda.synchronize()
    for b in range(B):
        o_ref, _ = _ref(q[b], kc[b, :250], vc[b, :250], window=(60, -1), softcap=10.0)
        _close(out[b], o_ref, dtype, f"kvcache window+softcap b={b}")


def _cu_seqlens(lens):
    """int32 cu_seqlens (len(lens) + 1) on the GPU."""
    return torch.tensor([0] + list(torch.tensor(lens).cumsum(0)), dtype=torch.int32,
                        device="cuda")


@needs_cuda
def test_varlen_func_cuda():
    torch.manual_seed(3)
    for dtype in (torch.bfloat16, torch.float16):
        lens_q, lens_k = [37, 0, 64, 5], [80, 0, 64, 300]
        cu_q, cu_k = _cu_seqlens(lens_q), _cu_seqlens(lens_k)
        Hq, Hkv, D = 8, 2, 128
        q = torch.randn(sum(lens_q), Hq, D, dtype=dtype, device="cuda")
        k = torch.randn(sum(lens_k), Hkv, D, dtype=dtype, device="cuda")
        v = torch.randn(sum(lens_k), Hkv, D, dtype=dtype, device="cuda")
        out = flashc.flash_attn_varlen_func(q, k, v, cu_q, cu_k, max(lens_q), max(lens_k),
                                            causal=True)
        torch.cuda.synchronize()
        for b in range(len(lens_q)):
            if lens_q[b] == 0:
                continue
            qs, ks = slice(int(cu_q[b]), int(cu_q[b + 1])), slice(int(cu_k[b]), int(cu_k[b + 1]))
            o_ref, _ = _ref(q[qs], k[ks], v[ks], causal=True)
            _close(out[qs], o_ref, dtype, f"varlen {dtype} b={b}")


@needs_cuda
def test_varlen_paged_cuda():
    """flash_attn_varlen_func(block_table=...) on CUDA (the KV-cache kernel's paged loaders):
    each sequence against the reference on its keys gathered from shuffled pages; a backward
    through it raises."""
    torch.manual_seed(4)
    for dtype, ps in ((torch.bfloat16, 16), (torch.float16, 1)):
        lens_q, lens_k = [37, 0, 70, 1], [80, 5, 0, 300]
        cu_q, cu_k = _cu_seqlens(lens_q), _cu_seqlens(lens_k)
        Hq, Hkv, D = 8, 2, 128
        maxp = max(-(-n // ps) for n in lens_k)
        npages = len(lens_k) * maxp + 3
        table = torch.randperm(npages, device="cuda")[: len(lens_k) * maxp].reshape(
            len(lens_k), maxp).to(torch.int32)
        kc = torch.randn(npages, ps, Hkv, D, dtype=dtype, device="cuda")
        vc = torch.randn(npages, ps, Hkv, D, dtype=dtype, device="cuda")
        q = torch.randn(sum(lens_q), Hq, D, dtype=dtype, device="cuda", requires_grad=True)
        out = flashc.flash_attn_varlen_func(q, kc, vc, cu_q, cu_k, max(lens_q), max(lens_k),
                                            causal=True, block_table=table)
        torch.cuda.synchronize()
        for b in range(len(lens_q)):
            if lens_q[b] == 0:
                continue
            rows = torch.arange(lens_k[b], device="cuda")
            pg = table[b].long()[rows // ps]
            qs = slice(int(cu_q[b]), int(cu_q[b + 1]))
            o_ref, _ = _ref(q[qs].detach(), kc[pg, rows % ps], vc[pg, rows % ps], causal=True)
            _close(out[qs].detach(), o_ref, dtype, f"paged varlen {dtype} page {ps} b={b}")
        try:
            out.sum().backward()
        except NotImplementedError as e:
            assert "forward only" in str(e)
        else:
            raise AssertionError("a backward through a paged varlen call did not raise")


if __name__ == "__main__":
    if torch is None or not torch.cuda.is_available() or not flashc.cuda_available():
        print("test_cuda_serving.py: SKIPPED (no torch CUDA or no CUDA libflashc)")
        sys.exit(0)
    failed = 0
    for name, fn in sorted(globals().items()):
        if name.startswith("test_") and callable(fn):
            try:
                fn()
                print(f"PASSED {name}")
            except Exception as e:  # report and go on
                failed += 1
                print(f"FAILED {name}: {type(e).__name__}: {e}")
    sys.exit(1 if failed else 0)
