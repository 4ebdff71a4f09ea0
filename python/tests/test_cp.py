"""Context parallelism from Python (flashc.cp): simulated ranks as threads of this process on
the CPU kernels, against single-call attention over the whole sequence.

numpy: cp_attn_forward / cp_attn_backward for N = 1..4, three shards, causal and not, GQA.
torch (skipped without torch): ring-flash-attention's drop-ins (ring_flash_attn_func,
zigzag_ring_flash_attn_func, stripe_flash_attn_func) with autograd, each rank's backward in
its own thread; and from_process_group's refusal where there is no NCCL or GPU (a one-rank gloo
group). The NCCL path itself needs GPUs (tests/test_cp_nccl.c, bench/gpu/cp_check.sh).
"""

import threading

import numpy as np
import pytest

import flashc
from flashc import cp


def run_ranks(fn, n):
    """fn(rank) in n threads; returns the results in rank order, re-raising the first error."""
    out, errs = [None] * n, [None] * n

    def body(r):
        try:
            out[r] = fn(r)
        except BaseException as e:  # noqa: BLE001 - re-raised below
            errs[r] = e

    threads = [threading.Thread(target=body, args=(r,)) for r in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for e in errs:
        if e is not None:
            raise e
    return out


def shard_of(x, shard, n, r):
    S = x.shape[1]
    return x[:, cp.global_indices(shard, S, n, r)]


def gather(parts, shard, n, S, axis=1):
    shape = list(parts[0].shape)
    shape[axis] = S
    full = np.empty(shape, parts[0].dtype)
    for r, p in enumerate(parts):
        idx = cp.global_indices(shard, S, n, r)
        if axis == 1:
            full[:, idx] = p
        else:
            full[:, :, idx] = p
    return full


@pytest.mark.parametrize("n", [1, 2, 3, 4])
@pytest.mark.parametrize("shard", ["contiguous", "zigzag", "striped"])
@pytest.mark.parametrize("causal", [False, True])
def test_numpy_ring_matches_single_call(rng, n, shard, causal, c_backward):
    B, S, Hq, Hkv, D = 2, 4 * n + 3, 4, 2, 16
    q = rng.standard_normal((B, S, Hq, D), dtype=np.float32)
    k = rng.standard_normal((B, S, Hkv, D), dtype=np.float32)
    v = rng.standard_normal((B, S, Hkv, D), dtype=np.float32)
    dout = rng.standard_normal((B, S, Hq, D), dtype=np.float32)
    o1, lse1, _ = flashc.flash_attn_func(q, k, v, causal=causal, return_attn_probs=True)
    dq1, dk1, dv1 = flashc.flash_attn_backward(dout, q, k, v, o1, lse1, causal=causal)
    comms = cp.Comm.simulated(n)

    def rank(r):
        sl = [np.ascontiguousarray(shard_of(x, shard, n, r)) for x in (q, k, v, dout)]
        o, lse = cp.cp_attn_forward(sl[0], sl[1], sl[2], comms[r], S, shard, causal)
        grads = cp.cp_attn_backward(sl[3], sl[0], sl[1], sl[2], o, lse, comms[r], S, shard, causal)
        return (o, lse) + grads

    res = run_ranks(rank, n)
    np.testing.assert_allclose(gather([x[0] for x in res], shard, n, S), o1, atol=2e-5, rtol=1e-5)
    np.testing.assert_allclose(gather([x[1] for x in res], shard, n, S, axis=2), lse1, atol=2e-5,
                               rtol=1e-5)
    for i, ref in zip((2, 3, 4), (dq1, dk1, dv1)):
        np.testing.assert_allclose(gather([x[i] for x in res], shard, n, S), ref, atol=5e-5,
                                   rtol=1e-4)
    for c in comms:
        c.close()


def test_shard_maps():
    assert cp.local_len("zigzag", 10, 2, 0) == 5
    assert cp.global_indices("zigzag", 8, 2, 0) == [0, 1, 6, 7]
    assert cp.global_indices("striped", 8, 2, 1) == [1, 3, 5, 7]
    assert cp.global_indices("contiguous", 7, 2, 1) == [3, 4, 5, 6]
    with pytest.raises(ValueError):
        cp.local_len("zigzag", 10, 2, 5)
    with pytest.raises(ValueError):
        cp.local_len("diagonal", 10, 2, 0)


def test_bad_rank_does_not_hang(rng):
    """A rank with the wrong slice length is refused; its peer returns an error too."""
    comms = cp.Comm.simulated(2)

    def rank(r):
        L = 4 + r
        q = rng.standard_normal((1, L, 1, 8), dtype=np.float32)
        try:
            cp.cp_attn_forward(q, q.copy(), q.copy(), comms[r], 8)
        except flashc.FlashcError as e:
            return e
        return None

    errs = run_ranks(rank, 2)
    assert all(isinstance(e, flashc.FlashcError) for e in errs)
    assert "q.shape[1] = 5" in errs[1].detail
    assert "peer rank" in errs[0].detail


# ---- torch ----------------------------------------------------------------------------------


@pytest.mark.parametrize("n", [2, 4])
@pytest.mark.parametrize("name,shard", [("ring_flash_attn_func", "contiguous"),
                                        ("zigzag_ring_flash_attn_func", "zigzag"),
                                        ("stripe_flash_attn_func", "striped")])
@pytest.mark.parametrize("causal", [False, True])
def test_torch_dropins_autograd(rng, n, name, shard, causal, c_backward):
    torch = pytest.importorskip("torch")
    fn = getattr(cp, name)
    B, S, Hq, Hkv, D = 1, 8 * n, 4, 1, 32
    q = torch.from_numpy(rng.standard_normal((B, S, Hq, D), dtype=np.float32))
    k = torch.from_numpy(rng.standard_normal((B, S, Hkv, D), dtype=np.float32))
    v = torch.from_numpy(rng.standard_normal((B, S, Hkv, D), dtype=np.float32))
    dout = torch.from_numpy(rng.standard_normal((B, S, Hq, D), dtype=np.float32))
    qf, kf, vf = (x.clone().requires_grad_() for x in (q, k, v))
    ref = flashc.flash_attn_func(qf, kf, vf, causal=causal)
    ref.backward(dout)
    comms = cp.Comm.simulated(n)

    def rank(r):
        idx = torch.tensor(cp.global_indices(shard, S, n, r))
        ql, kl, vl = (x[:, idx].contiguous().requires_grad_() for x in (q, k, v))
        out, lse, _ = fn(ql, kl, vl, causal=causal, return_attn_probs=True, group=comms[r])
        out.backward(dout[:, idx])
        return idx, out.detach(), ql.grad, kl.grad, vl.grad

    res = run_ranks(rank, n)
    got = [torch.empty_like(x) for x in (ref, q, k, v)]
    for idx, *parts in res:
        for g, p in zip(got, parts):
            g[:, idx] = p
    torch.testing.assert_close(got[0], ref.detach(), atol=2e-5, rtol=1e-5)
    for g, want in zip(got[1:], (qf.grad, kf.grad, vf.grad)):
        torch.testing.assert_close(g, want, atol=5e-5, rtol=1e-4)


def test_torch_unsupported_options():
    torch = pytest.importorskip("torch")
    comms = cp.Comm.simulated(1)
    q = torch.zeros(1, 4, 1, 8)
    with pytest.raises(NotImplementedError):
        cp.ring_flash_attn_func(q, q, q, dropout_p=0.1, group=comms[0])
    with pytest.raises(NotImplementedError):
        cp.zigzag_ring_flash_attn_func(q, q, q, window_size=(2, 0), group=comms[0])
    out = cp.ring_flash_attn_qkvpacked_func(torch.zeros(1, 4, 3, 1, 8), group=comms[0])
    assert out.shape == (1, 4, 1, 8)


def test_process_group_front_end(tmp_path):
    """A one-rank gloo group: with NCCL and a GPU, the communicator is made and cached; without,
    the library's refusal arrives as FlashcNotImplementedError (or a device error)."""
    torch = pytest.importorskip("torch")
    import torch.distributed as dist

    if dist.is_initialized():
        pytest.skip("a process group is already initialised")
    store = dist.FileStore(str(tmp_path / "store"), 1)
    dist.init_process_group("gloo", store=store, rank=0, world_size=1)
    try:
        if cp.nccl_available() and torch.cuda.is_available():
            c = cp.from_process_group()
            assert (c.rank, c.size) == (0, 1)
            assert cp.from_process_group() is c
        else:
            with pytest.raises((flashc.FlashcNotImplementedError, flashc.FlashcRuntimeError)):
                cp.from_process_group()
    finally:
        dist.destroy_process_group()
