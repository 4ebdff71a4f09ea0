"""What the row-op GPU benches share (bench/gpu/bench_rows4.py, bench_rows.py, bench_rows_targets.py;
bench_rows2.py and bench_rows3.py were folded into bench_rows4.py): CUDA-event timing, the variant
switch, the copy ceilings in the same run, the torch.profiler breakdown and the result table.

Timing: CUDA events around batches of `calls` back-to-back calls, the median of `reps` batches
after a warm-up batch; a call's time is the batch's over `calls` (timed: one function's batches
in a row; Rounds: every row's batch once a round, in turn). Bytes are the fewest each op
must move (bf16: x read + y written for the forward, and so on); TB/s = bytes / time.
"""

import ctypes
import os
import statistics
import time

import torch


def timed(fn, calls, reps):
    fn()
    torch.cuda.synchronize()
    out = []
    for _ in range(reps + 1):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        for _ in range(calls):
            fn()
        b.record()
        b.synchronize()
        out.append(a.elapsed_time(b) / calls)
    return statistics.median(out[1:])  # the first batch is a warm-up


def sync(cuda):
    if cuda:
        torch.cuda.synchronize()


class Rounds:
    """Rows timed in interleaved rounds: add() runs nothing (check a row before adding it); run()
    times a warm-up round and `reps` rounds, every row's batch of `calls` once a round, in turn,
    and returns {key: ms (median), min_ms, tbps, bytes, note}. env_name: the variable a row's
    env sets (None: unset) before its batches, so that variants of one library call interleave.
    cuda False: a dry run on the host (wall-clock time)."""

    def __init__(self, calls, reps, cuda=True, env_name=None):
        self.calls, self.reps, self.rows, self.cuda, self.env_name = calls, reps, [], cuda, env_name

    def add(self, key, fn, nbytes, env=None, note=""):
        self.rows.append({"key": key, "fn": fn, "bytes": nbytes, "env": env, "note": note, "ms": []})

    def run(self):
        for rnd in range(self.reps + 1):
            for r in self.rows:
                if self.env_name:
                    setvar(self.env_name, r["env"])
                r["fn"]()
                sync(self.cuda)
                if self.cuda:
                    a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                    a.record()
                t = time.perf_counter()
                for _ in range(self.calls):
                    r["fn"]()
                if self.cuda:
                    b.record()
                    b.synchronize()
                ms = a.elapsed_time(b) if self.cuda else (time.perf_counter() - t) * 1e3
                if rnd > 0:  # round 0 is a warm-up
                    r["ms"].append(ms / self.calls)
        if self.env_name:
            setvar(self.env_name, None)
        out = {}
        for r in self.rows:
            ms = statistics.median(r["ms"])
            out[r["key"]] = {"ms": ms, "tbps": r["bytes"] / (ms * 1e-3) / 1e12, "bytes": r["bytes"],
                             "min_ms": min(r["ms"]), "note": r["note"]}
        return out


def setvar(name, v):
    """Sets (or, v None, unsets) a variable the library reads at every call."""
    if v is None:
        os.environ.pop(name, None)
    else:
        os.environ[name] = v


def relerr(a, b):
    return ((a.float() - b.float()).abs() / (1 + b.float().abs())).max().item()


def kshort(n):
    n = n.split("(")[0].replace("void ", "")
    return n.split("<")[0][:40]


def breakdown(fn, calls):
    """Per call: each kernel's device time (CUPTI through torch.profiler) and the span from the
    first kernel's start to the last one's end, over `calls` back-to-back calls."""
    from torch.profiler import ProfilerActivity, profile

    fn()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(calls):
            fn()
        torch.cuda.synchronize()
    ev = [e for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA]
    if not ev:
        raise RuntimeError("no device events")
    per, cnt = {}, {}
    for e in ev:
        k = kshort(e.name)
        per[k] = per.get(k, 0.0) + e.time_range.elapsed_us()
        cnt[k] = cnt.get(k, 0) + 1
    span = (max(e.time_range.end for e in ev) - min(e.time_range.start for e in ev)) / calls
    return {k: (v / calls, cnt[k] / calls) for k, v in per.items()}, span


def load_copylib(path):
    """bench/gpu/rows_copy.cu built as a shared library (the device scripts build it with nvcc),
    or None."""
    if not path:
        return None
    try:
        cl = ctypes.CDLL(path)
        cl.rows_copy.restype = ctypes.c_int
        cl.rows_copy.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_longlong, ctypes.c_longlong,
                                 ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_int]
        cl.rows_copy3.restype = ctypes.c_int
        cl.rows_copy3.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_longlong, ctypes.c_longlong,
                                  ctypes.c_int]
        if hasattr(cl, "rows_copy3r"):
            cl.rows_copy3r.restype = ctypes.c_int
            cl.rows_copy3r.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_longlong,
                                       ctypes.c_longlong, ctypes.c_int, ctypes.c_int]
        return cl
    except OSError as ex:
        print(f"copy library not loaded: {ex}", flush=True)
        return None


class Table:
    """The rows of one bench run: each printed as it is measured, the table at the end."""

    def __init__(self, budget):
        self.rows, self.profs = [], []
        self.deadline = time.monotonic() + budget

    def late(self):
        return time.monotonic() > self.deadline

    def row(self, shape, op, impl, ms, nbytes, peer=None, note=""):
        r = {"shape": shape, "op": op, "impl": impl, "ms": ms, "tbps": nbytes / (ms * 1e-3) / 1e12, "note": note}
        if peer is not None:
            r["vs_peer"] = r["tbps"] / peer["tbps"]
        self.rows.append(r)
        print(f"  {shape} {op:8s} {impl:26s} {ms * 1e3:8.1f} us {r['tbps']:5.2f} TB/s {note}", flush=True)
        return r

    def fail(self, shape, op, impl, ex):
        print(f"  {shape} {op} {impl}: FAILED: {ex}", flush=True)
        self.rows.append({"shape": shape, "op": op, "impl": impl, "error": str(ex)})

    def prof(self, shape, op, impl, fn, calls):
        """The kernel breakdown of fn, a diagnosis: never a failure."""
        if self.late():
            return
        try:
            ks, span = breakdown(fn, calls)
        except Exception as ex:
            print(f"  prof {shape} {op} {impl}: {ex}", flush=True)
            return
        self.profs.append({"shape": shape, "op": op, "impl": impl, "span_us": span, "kernels": ks})

    def of_copy(self, shape, cp):
        for q in self.rows:
            if q.get("shape") == shape and "tbps" in q:
                q["of_copy"] = q["tbps"] / cp["tbps"]

    def print(self, title):
        if self.profs:
            print("\nkernel breakdown (torch.profiler; us per call: span = first kernel start to last end / calls)")
            for q in self.profs:
                ks = "; ".join(f"{k} {v[0]:.1f} (x{v[1]:.0f})"
                               for k, v in sorted(q["kernels"].items(), key=lambda kv: -kv[1][0]))
                tot = sum(v[0] for v in q["kernels"].values())
                print(f"  {q['shape']} {q['op']} {q['impl']}: span {q['span_us']:.1f}, kernels {tot:.1f}, "
                      f"gaps {q['span_us'] - tot:.1f}: {ks}")
        print(f"\n{title}, {torch.cuda.get_device_name()}, torch {torch.__version__}")
        print("| shape | op | impl | us | TB/s | of clone | vs torch |")
        print("|---|---|---|--:|--:|--:|--:|")
        for q in self.rows:
            if "error" in q:
                print(f"| {q['shape']} | {q['op']} | {q['impl']} | FAILED: {q['error'][:50]} | | | |")
                continue
            vs = f"{q['vs_peer']:.2f}x" if "vs_peer" in q else ""
            print(f"| {q['shape']} | {q['op']} | {q['impl']} | {q['ms'] * 1e3:.1f} | {q['tbps']:.2f} | "
                  f"{100 * q.get('of_copy', 0):.0f}% | {vs} |")


def copy_ceilings(tab, cl, x, T, D, copies, calls, reps, narrow):
    """The same run's copies of a bf16 (T, D) tensor: torch's clone (returned: the "of clone"
    reference), then rows_copy.cu's copies (name, kind, p0..p3; kinds other than 0 only for rows
    of <= 512 chunks), torch.add(x, dy, out=dx) (the backward's two reads and one write) and
    rows_copy.cu's flat x ^ dy copy without and with PDL, and (rows of 512 chunks) the same in
    rms_bwd_reg's pattern (persistent, 128 threads a row, the next row prefetched: cs hints /
    plain / cs with a barrier a row); each copy is checked before it is timed."""
    shape = f"{T}x{D}"
    cp = tab.row(shape, "copy", "torch clone (T, D)", timed(lambda: x.clone(), calls, reps), 2 * T * D * 2)
    y = torch.empty_like(x)
    if cl is not None:
        for name, kind, p0, p1, p2, p3 in copies:
            if kind and not narrow:
                continue
            y.zero_()
            args = (kind, ctypes.c_void_p(x.data_ptr()), ctypes.c_void_p(y.data_ptr()), T, D, p0, p1, p2, p3)
            st = cl.rows_copy(*args)
            torch.cuda.synchronize()
            if st != 0 or not torch.equal(y, x):
                tab.fail(shape, "copy", name, f"status {st}" if st else "y != x")
                continue
            tab.row(shape, "copy", name, timed(lambda: cl.rows_copy(*args), calls, reps), 2 * T * D * 2, cp)
    dyc, dxc = torch.randn(T, D, device=x.device, dtype=x.dtype), torch.empty_like(x)
    tab.row(shape, "copy3", "torch.add(x, dy, out=dx)", timed(lambda: torch.add(x, dyc, out=dxc), calls, reps),
            3 * T * D * 2, cp)
    if cl is not None:
        want = x.view(torch.int16) ^ dyc.view(torch.int16)
        ptrs = (ctypes.c_void_p(x.data_ptr()), ctypes.c_void_p(dyc.data_ptr()), ctypes.c_void_p(dxc.data_ptr()), T, D)
        cases = [(f"flat x^dy cs{' PDL' if pdl else ''}", cl.rows_copy3, ptrs + (pdl,)) for pdl in (0, 1)]
        if hasattr(cl, "rows_copy3r") and D == 4096:
            cases += [(name, cl.rows_copy3r, ptrs + (0, f))
                      for name, f in (("rows x^dy as v2, cs", 0), ("rows x^dy as v2, plain", 1), ("rows x^dy as v2, cs + barrier", 2))]
        for name, fn, args3 in cases:
            dxc.zero_()
            st = fn(*args3)
            torch.cuda.synchronize()
            if st != 0 or not torch.equal(dxc.view(torch.int16), want):
                tab.fail(shape, "copy3", name, f"status {st}" if st else "wrong")
                continue
            tab.row(shape, "copy3", name, timed(lambda: fn(*args3), calls, reps), 3 * T * D * 2, cp)
    return cp
