"""Summary of fa_suite.sh's case log (conftest.py's FA_LOG: one JSON line per case) of
flash-attention's test file run on flashc: per test function, cases passed / failed / skipped,
and the failures grouped by the first line of their message (flashc's refusals name what it does
not serve), with the test functions each group comes from. Markdown on stdout."""
import collections
import json
import re
import sys


def main(path):
    per = collections.OrderedDict()
    why = collections.Counter()
    why_fn = collections.defaultdict(collections.Counter)
    seen = set()
    for line in open(path):
        try:
            r = json.loads(line)
        except ValueError:
            continue
        if r["id"] in seen:  # a failed setup and a failed call of one case count once
            continue
        seen.add(r["id"])
        fn = r["id"].split("::")[-1].split("[")[0]
        st = per.setdefault(fn, collections.Counter())
        st[r["outcome"]] += 1
        st["time"] += r["s"]
        if r["outcome"] == "failed":
            first = (r["msg"].strip().splitlines() or ["?"])[0]
            first = re.sub(r"-?\d+\.\d+(e-?\d+)?", "#", first)[:160]
            why[first] += 1
            why_fn[first][fn] += 1
    tot = collections.Counter()
    print("| test function | cases run | passed | failed | skipped | s |")
    print("|---|--:|--:|--:|--:|--:|")
    for fn, st in per.items():
        n = st["passed"] + st["failed"] + st["skipped"]
        print(f"| {fn} | {n} | {st['passed']} | {st['failed']} | {st['skipped']} | {st['time']:.0f} |")
        for k in ("passed", "failed", "skipped"):
            tot[k] += st[k]
    n = tot["passed"] + tot["failed"] + tot["skipped"]
    print(f"| **all** | {n} | {tot['passed']} | {tot['failed']} | {tot['skipped']} | |")
    print()
    print("Failures by the first line of their message (numbers as #):")
    print()
    for m, c in why.most_common(30):
        fns = ", ".join(f"{k} {v}" for k, v in why_fn[m].items())
        print(f"- {c} x `{m}` ({fns})")


if __name__ == "__main__":
    main(sys.argv[1])
