"""Context parallelism: ring attention across ranks (flashc_cp_attn_fwd / _bwd, issue 17).

One sequence is split over the ranks of a communicator; each rank passes its own rows of q, k, v
(batch, local_seqlen, nheads, headdim) and gets its rows of the attention over the whole
sequence. Two kinds of communicator:

  Comm.simulated(n)     n ranks inside this process (one thread per rank, each calling with its
                        own handle); host tensors on the CPU kernels, or CUDA tensors on one GPU.
                        What the tests use.
  from_process_group(g) the NCCL communicator of a torch.distributed group: rank 0 of the group
                        makes an ncclUniqueId, the group broadcasts it (any backend: gloo, nccl),
                        and every rank joins with flashc_cp_comm_nccl_init on its current CUDA
                        device. Cached per group. One GPU per rank.

Drop-ins for the ring-flash-attention package (zhuzilin/ring-flash-attention):

    from ring_flash_attn import ring_flash_attn_func, zigzag_ring_flash_attn_func
becomes
    from flashc.cp import ring_flash_attn_func, zigzag_ring_flash_attn_func

with the same arguments; ``group`` is a torch.distributed group (None: the default group) or a
flashc Comm. ring_flash_attn_func takes contiguous slices (rank r holds tokens
[r L, (r + 1) L)), zigzag_ring_flash_attn_func the zig-zag layout (rank r holds chunk r and
chunk 2N - 1 - r of 2N); stripe_flash_attn_func the striped one (tokens r, r + N, ...).
dropout, windows and ALiBi are not supported (NotImplementedError), as in flashc's C API.
Gradients flow through torch.autograd (the backward is flashc_cp_attn_bwd).

NVLink multicast is never used by flashc; set NCCL_NVLS_ENABLE=0 in the environment of jobs on
machines whose NVSwitch multicast must stay off.
"""

from __future__ import annotations

import ctypes
import math
import threading
import weakref
from typing import Any, Optional

from . import _arrays, _lib

SHARDS = {"contiguous": _lib.CP_SHARD_CONTIGUOUS, "zigzag": _lib.CP_SHARD_ZIGZAG,
          "striped": _lib.CP_SHARD_STRIPED}


def _shard_code(shard) -> int:
    if isinstance(shard, str):
        if shard not in SHARDS:
            raise ValueError(f"flashc: shard = {shard!r}; one of {sorted(SHARDS)}")
        return SHARDS[shard]
    return int(shard)


# ---- communicators -----------------------------------------------------------------------


class Comm:
    """A flashc_cp_comm handle (one rank). Closed by close() or when collected."""

    def __init__(self, handle: int):
        self._h = ctypes.c_void_p(handle)
        lib = _lib.library()
        self.rank = lib.flashc_cp_comm_rank(self._h)
        self.size = lib.flashc_cp_comm_size(self._h)
        self._finalizer = weakref.finalize(self, lib.flashc_cp_comm_destroy, self._h)

    @property
    def handle(self) -> ctypes.c_void_p:
        if not self._finalizer.alive:
            raise ValueError("flashc: this Comm is closed")
        return self._h

    def close(self) -> None:
        self._finalizer()

    def __repr__(self) -> str:
        return f"flashc.cp.Comm(rank={self.rank}, size={self.size})"

    @staticmethod
    def simulated(n: int) -> list:
        """n simulated ranks of one process: a Comm per rank, each for its own thread."""
        lib = _lib.library()
        arr = (ctypes.c_void_p * n)()
        _lib.check(lib.flashc_cp_comm_sim_create(n, arr))
        return [Comm(arr[i]) for i in range(n)]

    @staticmethod
    def nccl_unique_id() -> bytes:
        lib = _lib.library()
        buf = ctypes.create_string_buffer(_lib.CP_NCCL_ID_BYTES)
        _lib.check(lib.flashc_cp_nccl_unique_id(buf, _lib.CP_NCCL_ID_BYTES))
        return buf.raw

    @staticmethod
    def nccl(nranks: int, rank: int, unique_id: bytes) -> "Comm":
        """Joins an NCCL communicator (ncclCommInitRank on the current CUDA device)."""
        if len(unique_id) != _lib.CP_NCCL_ID_BYTES:
            raise ValueError(f"flashc: unique_id has {len(unique_id)} bytes, expected "
                             f"{_lib.CP_NCCL_ID_BYTES}")
        lib = _lib.library()
        out = ctypes.c_void_p()
        _lib.check(lib.flashc_cp_comm_nccl_init(nranks, rank, unique_id, len(unique_id),
                                                ctypes.byref(out)))
        return Comm(out.value)


def nccl_available() -> bool:
    return bool(_lib.library().flashc_cp_nccl_available())


_group_comms: dict = {}
_group_lock = threading.Lock()


def from_process_group(group=None) -> Comm:
    """The flashc NCCL communicator of a torch.distributed group (None: the default group),
    created on first use and cached: rank 0 makes the ncclUniqueId, broadcast_object_list hands
    it to the group, each rank joins on its current CUDA device (torch.cuda.current_device())."""
    import torch
    import torch.distributed as dist

    if group is None:
        group = dist.group.WORLD
    key = id(group)
    with _group_lock:
        if key in _group_comms:
            return _group_comms[key]
        rank, size = dist.get_rank(group), dist.get_world_size(group)
        uid = [Comm.nccl_unique_id() if rank == 0 else None]
        src = dist.get_global_rank(group, 0) if group is not dist.group.WORLD else 0
        dist.broadcast_object_list(uid, src=src, group=group)
        with torch.cuda.device(torch.cuda.current_device()):
            comm = Comm.nccl(size, rank, uid[0])
        _group_comms[key] = comm
        return comm


def _comm_of(group) -> Comm:
    return group if isinstance(group, Comm) else from_process_group(group)


# ---- shards ------------------------------------------------------------------------------


def local_len(shard, seqlen: int, nranks: int, rank: int) -> int:
    """Rows rank holds of a seqlen-token sequence (flashc_cp_local_len)."""
    n = _lib.library().flashc_cp_local_len(_shard_code(shard), seqlen, nranks, rank)
    if n < 0:
        raise ValueError(f"flashc: no shard for seqlen={seqlen}, nranks={nranks}, rank={rank}")
    return n


def global_indices(shard, seqlen: int, nranks: int, rank: int) -> list:
    """The global token index of each local row of rank (flashc_cp_global_index)."""
    lib = _lib.library()
    code = _shard_code(shard)
    return [lib.flashc_cp_global_index(code, seqlen, nranks, rank, i)
            for i in range(local_len(shard, seqlen, nranks, rank))]


# ---- the calls ---------------------------------------------------------------------------


def _params(comm: Comm, seqlen: int, shard, causal, softmax_scale, deterministic, stream):
    p = _lib.new_cp_params()
    p.comm = comm.handle
    p.seqlen = seqlen
    p.shard = _shard_code(shard)
    p.causal = 1 if causal else 0
    if softmax_scale is not None:
        p.has_softmax_scale = 1
        p.softmax_scale = float(softmax_scale)
    p.deterministic = 1 if deterministic else 0
    p.cuda_stream = stream
    return p


def _global_seqlen(q, comm: Comm, shard, seqlen: Optional[int]) -> int:
    if seqlen is not None:
        return int(seqlen)
    # every rank holds the same number of rows (ring-flash-attention's contract)
    return q.shape[1] * comm.size


def _contig(x):
    return x if _arrays.is_plain(x) else _arrays.copy_of(x)


def cp_attn_forward(q, k, v, comm: Comm, seqlen: Optional[int] = None, shard="contiguous",
                    causal=False, softmax_scale=None):
    """(out, lse) of this rank's rows; no autograd. q (B, L, Hq, D), k, v (B, L, Hkv, D/Dv);
    out (B, L, Hq, Dv) like q, lse float32 (B, Hq, L). seqlen: the whole sequence (default:
    L times the rank count)."""
    _arrays.common_kind({"q": q, "k": k, "v": v})
    S = _global_seqlen(q, comm, shard, seqlen)
    out = _arrays.empty_like_kind(q, tuple(q.shape[:3]) + (v.shape[3],))
    lse = _arrays.empty_like_kind(q, (q.shape[0], q.shape[2], q.shape[1]), "float32")
    vs = [_arrays.view(n, x) for n, x in (("q", q), ("k", k), ("v", v), ("out", out), ("lse", lse))]
    lib = _lib.library()
    with _arrays.device_scope(q) as stream:
        p = _params(comm, S, shard, causal, softmax_scale, False, stream)
        _lib.check(lib.flashc_cp_attn_fwd(ctypes.byref(p), *[x.ref for x in vs]))
    return out, lse


def cp_attn_backward(dout, q, k, v, out, lse, comm: Comm, seqlen: Optional[int] = None,
                     shard="contiguous", causal=False, softmax_scale=None, deterministic=False):
    """(dq, dk, dv) of this rank's rows (flashc_cp_attn_bwd); every rank calls it."""
    _arrays.common_kind({"dout": dout, "q": q, "k": k, "v": v, "out": out, "lse": lse})
    S = _global_seqlen(q, comm, shard, seqlen)
    dq = _arrays.empty_like_kind(q, tuple(q.shape))
    dk = _arrays.empty_like_kind(q, tuple(k.shape))
    dv = _arrays.empty_like_kind(q, tuple(v.shape))
    named = (("q", q), ("k", k), ("v", v), ("out", out), ("dout", dout), ("lse", lse),
             ("dq", dq), ("dk", dk), ("dv", dv))
    vs = [_arrays.view(n, x) for n, x in named]
    lib = _lib.library()
    with _arrays.device_scope(q) as stream:
        p = _params(comm, S, shard, causal, softmax_scale, deterministic, stream)
        _lib.check(lib.flashc_cp_attn_bwd(ctypes.byref(p), *[x.ref for x in vs]))
    return dq, dk, dv


def _autograd_fn():
    import torch

    class CPAttnFunc(torch.autograd.Function):
        @staticmethod
        def forward(ctx, q, k, v, comm, seqlen, shard, causal, softmax_scale, deterministic):
            out, lse = cp_attn_forward(q, k, v, comm, seqlen, shard, causal, softmax_scale)
            ctx.save_for_backward(q, k, v, out, lse)
            ctx.args = (comm, seqlen, shard, causal, softmax_scale, deterministic)
            ctx.mark_non_differentiable(lse)
            return out, lse

        @staticmethod
        def backward(ctx, dout, dlse):
            q, k, v, out, lse = ctx.saved_tensors
            comm, seqlen, shard, causal, scale, det = ctx.args
            dq, dk, dv = cp_attn_backward(_contig(dout), q, k, v, out, lse, comm, seqlen, shard,
                                          causal, scale, det)
            return dq, dk, dv, None, None, None, None, None, None

    return CPAttnFunc


_fn_cache: list = []


def cp_attn_func(q, k, v, group=None, shard="contiguous", causal=False, softmax_scale=None,
                 seqlen=None, deterministic=False, return_lse=False):
    """Context-parallel attention with autograd (torch) or without (numpy). group: a
    torch.distributed group (None: the default one) or a flashc Comm."""
    comm = _comm_of(group)
    if _arrays.is_torch(q):
        if not _fn_cache:
            _fn_cache.append(_autograd_fn())
        out, lse = _fn_cache[0].apply(q, k, v, comm, seqlen, shard, causal, softmax_scale,
                                      deterministic)
    else:
        out, lse = cp_attn_forward(q, k, v, comm, seqlen, shard, causal, softmax_scale)
    return (out, lse) if return_lse else out


def _ring_dropin(shard):
    def fn(q, k, v, dropout_p=0.0, softmax_scale=None, causal=False, window_size=(-1, -1),
           alibi_slopes=None, deterministic=False, return_attn_probs=False, group=None):
        if dropout_p:
            raise NotImplementedError("flashc: dropout is not supported")
        if tuple(window_size) != (-1, -1):
            raise NotImplementedError("flashc: context parallelism has no sliding window")
        if alibi_slopes is not None:
            raise NotImplementedError("flashc: context parallelism has no ALiBi")
        out, lse = cp_attn_func(q, k, v, group, shard, causal, softmax_scale, None,
                                deterministic, return_lse=True)
        return (out, lse, None) if return_attn_probs else out

    fn.__name__ = {"contiguous": "ring_flash_attn_func", "zigzag": "zigzag_ring_flash_attn_func",
                   "striped": "stripe_flash_attn_func"}[shard]
    fn.__doc__ = (f"ring-flash-attention's {fn.__name__} on flashc ({shard} slices): q, k, v "
                  "(batch, local_seqlen, nheads, headdim) of this rank; see the module doc.")
    return fn


ring_flash_attn_func = _ring_dropin("contiguous")
zigzag_ring_flash_attn_func = _ring_dropin("zigzag")
stripe_flash_attn_func = _ring_dropin("striped")


def ring_flash_attn_qkvpacked_func(qkv, dropout_p=0.0, softmax_scale=None, causal=False,
                                   window_size=(-1, -1), alibi_slopes=None, deterministic=False,
                                   return_attn_probs=False, group=None):
    """qkv (batch, local_seqlen, 3, nheads, headdim)."""
    return ring_flash_attn_func(qkv[:, :, 0], qkv[:, :, 1], qkv[:, :, 2], dropout_p,
                                softmax_scale, causal, window_size, alibi_slopes, deterministic,
                                return_attn_probs, group)


def zigzag_ring_flash_attn_qkvpacked_func(qkv, dropout_p=0.0, softmax_scale=None, causal=False,
                                          window_size=(-1, -1), alibi_slopes=None,
                                          deterministic=False, return_attn_probs=False,
                                          group=None):
    """qkv (batch, local_seqlen, 3, nheads, headdim)."""
    return zigzag_ring_flash_attn_func(qkv[:, :, 0], qkv[:, :, 1], qkv[:, :, 2], dropout_p,
                                       softmax_scale, causal, window_size, alibi_slopes,
                                       deterministic, return_attn_probs, group)


__all__ = [
    "Comm", "nccl_available", "from_process_group", "local_len", "global_indices",
    "cp_attn_forward", "cp_attn_backward", "cp_attn_func", "ring_flash_attn_func",
    "zigzag_ring_flash_attn_func", "stripe_flash_attn_func", "ring_flash_attn_qkvpacked_func",
    "zigzag_ring_flash_attn_qkvpacked_func", "SHARDS",
]
