"""pytest plugin for bench/gpu/fa_suite.sh: runs a fixed sample of flash-attention's test file.

FA_SAMPLE=N keeps one case in N of each test function, chosen by a hash of the case's id (the
same cases on every machine and run); FA_SAMPLE_SEED varies the choice; FA_SAMPLE=1 keeps all.
FA_NODROPOUT=1 leaves out the cases with dropout_p > 0 (flashc serves no dropout; they are
counted by the summary as refused). Off a GPU, torch.cuda.get_device_capability answers (9, 0)
so that the file can at least be collected (a count of the cases, nothing runs)."""
import hashlib
import json
import os

import torch

if not torch.cuda.is_available():
    torch.cuda.get_device_capability = lambda *a, **k: (9, 0)


def _keep(nodeid: str, n: int, seed: str) -> bool:
    h = hashlib.sha256((seed + nodeid).encode()).digest()
    return int.from_bytes(h[:8], "little") % n == 0


def pytest_collection_modifyitems(config, items):
    n = int(os.environ.get("FA_SAMPLE", "1"))
    seed = os.environ.get("FA_SAMPLE_SEED", "flashc")
    nodrop = os.environ.get("FA_NODROPOUT", "0") == "1"
    kept, dropped = [], []
    for it in items:
        p = getattr(it, "callspec", None)
        drop = p is not None and nodrop and float(p.params.get("dropout_p", 0.0) or 0.0) > 0.0
        if not drop and (n <= 1 or _keep(it.nodeid, n, seed)):
            kept.append(it)
        else:
            dropped.append(it)
    # in an order fixed by the same hash, so that a run cut by its time limit is still a sample
    # of every test function rather than the first ones of the file
    kept.sort(key=lambda it: hashlib.sha256(("order" + seed + it.nodeid).encode()).digest())
    items[:] = kept
    config.hook.pytest_deselected(items=dropped)


# One JSON line per case as it ends (FA_LOG), so that a run cut by its time limit still counts
# what ran (a JUnit report is written only at the end).
_log = None


def pytest_runtest_logreport(report):
    """A case's line: its call, or the setup / teardown phase that failed or skipped it."""
    global _log
    path = os.environ.get("FA_LOG")
    if not path or (report.when != "call" and report.outcome == "passed"):
        return
    msg = ""
    if report.failed:
        r = getattr(report, "longrepr", None)
        crash = getattr(r, "reprcrash", None)
        msg = str(r)
        if crash is not None:  # where it was raised, and the test file's line that led there
            entries = getattr(getattr(r, "reprtraceback", None), "reprentries", [])
            at = [e.reprfileloc for e in entries if getattr(e, "reprfileloc", None)]
            test_line = next((f.lineno for f in at if f.path.endswith("test_flash_attn.py")), 0)
            msg = (f"{os.path.basename(crash.path)}:{crash.lineno} (test line {test_line}): "
                   f"{crash.message}")
    elif report.skipped and isinstance(report.longrepr, tuple):
        msg = str(report.longrepr[2])
    if _log is None:
        _log = open(path, "a", buffering=1)
    _log.write(json.dumps({"id": report.nodeid, "outcome": report.outcome, "when": report.when,
                           "msg": msg[:400], "s": round(report.duration, 4)}) + "\n")
