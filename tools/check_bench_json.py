"""Reads `flashc bench --format json` on stdin and checks its structure (a ctest of the CLI).

Exits non-zero unless: the JSON parses; every expected (op, impl) row is present, without an
error; every non-reference row (not naive, not a --ceiling peer) has a finite max_err within its
tolerance; times, memory and traffic figures are positive where they must be."""
import json
import math
import sys

want = {tuple(x.split("/")) for x in sys.argv[1:]}
doc = json.load(sys.stdin)
rows = doc["results"]
assert doc["meta"]["command"].startswith("flashc bench"), doc["meta"]
got = {(r["op"], r["impl"]) for r in rows}
assert want <= got, f"missing rows: {want - got}"
for r in rows:
    assert "error" not in r, r
    assert r["ms"] > 0 and r["reps"] >= 1, r
    assert r["rss_mib"] > 0 and r["traffic_mib"] > 0 and r["peak_mib"] >= 0, r
    assert (r["gflops"] is None) != (r["gbps"] is None), r
    if r["impl"] == "naive" or (r["op"], r["impl"]) in {("sgemm", "openblas"), ("copy", "stream")}:
        assert r["max_err"] is None, r  # the reference, or a --ceiling peer (not compared)
    else:
        assert r["max_err"] is not None and math.isfinite(r["max_err"]), r
        assert r["max_err"] <= r["tol"], r
        assert r["speedup"] is not None and r["speedup"] > 0, r
print(f"ok: {len(rows)} rows")
