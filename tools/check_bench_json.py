"""Reads `flashc bench --format json` on stdin and checks its structure (a ctest of the CLI).

Arguments: op/impl pairs that must be present, and optionally dtype=NAME (f32, bf16, f16):
the storage dtype every op row must report (the --ceiling peers are float32).

Exits non-zero unless: the JSON parses; every expected (op, impl) row is present, without an
error; every non-reference row (not naive, not a --ceiling peer) has a finite max_err within its
tolerance; times, memory and traffic figures are positive where they must be; every row names
its dtype, and the row ops' modelled traffic is the docs/traffic.md pass count times the
dtype's element size."""
import json
import math
import sys

PEERS = {("sgemm", "openblas"), ("copy", "stream"), ("gemm_bf16", "onednn")}
ELEM = {"f32": 4, "bf16": 2, "f16": 2}
# docs/traffic.md: passes over the (T, D) or (T, I) tensors, naive and fused
PASSES = {("rmsnorm", "naive"): 5, ("rmsnorm", "fused"): 2, ("rmsnorm_res", "naive"): 8,
          ("rmsnorm_res", "fused"): 4, ("swiglu", "naive"): 5, ("swiglu", "fused"): 3}

args = sys.argv[1:]
dtype = next((a.split("=", 1)[1] for a in args if a.startswith("dtype=")), None)
want = {tuple(x.split("/")) for x in args if not x.startswith("dtype=")}
doc = json.load(sys.stdin)
rows = doc["results"]
# the inputs are drawn from meta.seed: a failure prints it, `flashc bench --seed N ...` replays it
print(f'"seed": {doc["meta"].get("seed")}', file=sys.stderr)
assert doc["meta"]["command"].startswith("flashc bench"), doc["meta"]
if dtype is not None:
    assert doc["meta"]["dtype"] == dtype, doc["meta"]
got = {(r["op"], r["impl"]) for r in rows}
assert want <= got, f"missing rows: {want - got}"
OPTIONAL = {("gemm_bf16", "onednn")}  # fails on CPUs that oneDNN has no bf16 gemm for (no AVX-512)
for r in rows:
    if (r["op"], r["impl"]) in OPTIONAL and "error" in r and (r["op"], r["impl"]) not in want:
        continue
    assert "error" not in r, r
    assert r["ms"] > 0 and r["reps"] >= 1, r
    assert r["rss_mib"] > 0 and r["traffic_mib"] > 0 and r["peak_mib"] >= 0, r
    assert (r["gflops"] is None) != (r["gbps"] is None), r
    assert r["dtype"] in ELEM, r
    if (r["op"], r["impl"]) in PEERS:
        assert r["dtype"] == ("bf16" if r["op"] == "gemm_bf16" else "f32"), r
    elif dtype is not None:
        assert r["dtype"] == dtype, r
    if (r["op"], r["impl"]) in PASSES:
        model = PASSES[(r["op"], r["impl"])] * ELEM[r["dtype"]] * r["n"] * r["d"] / 2**20
        assert math.isclose(r["traffic_mib"], model, rel_tol=1e-6), (model, r)
    if r["impl"] == "naive" or (r["op"], r["impl"]) in PEERS:
        assert r["max_err"] is None, r  # the reference, or a --ceiling peer (not compared)
    else:
        assert r["max_err"] is not None and math.isfinite(r["max_err"]), r
        assert r["max_err"] <= r["tol"], r
        assert r["speedup"] is not None and r["speedup"] > 0, r
print(f"ok: {len(rows)} rows")
