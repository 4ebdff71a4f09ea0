#!/usr/bin/env python3
"""bench/gpu/prof_table.py — the Python halves of the Nsight Compute passes of
bench/gpu/s9_prof2.sh and s32_decb1.sh.

  prof_table.py pick ALL.txt BASE.txt   the --metrics list: the candidates below that the device's
                                        `ncu --query-metrics --query-metrics-mode all` (ALL.txt) lists
                                        (ncu refuses a run with one unknown name; the launch__
                                        attributes are not listed and always kept); if that listing
                                        holds fewer than 5 others, those whose base name
                                        `ncu --query-metrics` (BASE.txt) lists. Prints one
                                        comma-separated line.
  prof_table.py kernels RAW.csv         one Markdown row a kernel launch of `ncu --csv --page raw`
                                        output, in launch order (name, grid x block, us, DRAM MB
                                        read / written), elementwise / fill kernels (the benches'
                                        L2 flushes) left out (bench/gpu/s32_decb1.sh).
  prof_table.py table RAW.csv DRIVE.log [RAW2.csv DRIVE2.log ...]
                                        one compact block a case from `ncu --csv --page raw` output,
                                        one pair a ncu run. Kernels are split into segments at each
                                        marker (spin_kernel, torch.cuda._sleep, see prof_drive.py
                                        --ranges), named by that run's DRIVE.log "SEG case side"
                                        lines in order.
"""
import csv
import os
import re
import sys

STALLS = ("long_scoreboard", "short_scoreboard", "barrier", "wait", "math_pipe_throttle",
          "mio_throttle", "lg_throttle", "not_selected", "dispatch_stall", "no_instruction",
          "membar", "sleeping", "branch_resolving", "drain", "imc_miss", "tex_throttle", "misc")
ABBR = {"long_scoreboard": "lsb", "short_scoreboard": "ssb", "barrier": "bar", "wait": "wait",
        "math_pipe_throttle": "math", "mio_throttle": "mio", "lg_throttle": "lg",
        "not_selected": "nsel", "dispatch_stall": "disp", "no_instruction": "noin", "membar": "mbar",
        "sleeping": "slp", "branch_resolving": "br", "drain": "drain", "imc_miss": "imc",
        "tex_throttle": "tex", "misc": "misc"}
TIME, GRID, BLOCK, REGS = ("gpu__time_duration.sum", "launch__grid_size", "launch__block_size",
                           "launch__registers_per_thread")
SMEM_DYN, SMEM_ST = "launch__shared_mem_per_block_dynamic", "launch__shared_mem_per_block_static"
HMMA = "sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active"
GMMA = ("sm__pipe_tensor_op_gmma_cycles_active.avg.pct_of_peak_sustained_active",
        "sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_active",
        "sm__inst_executed_pipe_tensor_op_gmma.avg.pct_of_peak_sustained_active")
ISSUE = "sm__inst_issued.avg.pct_of_peak_sustained_active"
DRAM, RD, WR = ("dram__throughput.avg.pct_of_peak_sustained_elapsed", "dram__bytes_read.sum",
                "dram__bytes_write.sum")
L2HIT, OCC = "lts__t_sector_hit_rate.pct", "sm__warps_active.avg.pct_of_peak_sustained_active"
# the L2's own load (issue 12's wide head dims: every K block re-reads Q, dO and reduce-adds dQ)
L2TP, L2B, L2RED = ("lts__throughput.avg.pct_of_peak_sustained_elapsed", "lts__t_bytes.sum",
                    "lts__t_sectors_op_red.sum")
BASIC = (TIME, GRID, BLOCK, REGS, SMEM_DYN, SMEM_ST, HMMA) + GMMA + (ISSUE, DRAM, RD, WR, L2HIT, OCC,
                                                                  L2TP, L2B, L2RED)
STALL_FAMILIES = ("smsp__average_warps_issue_stalled_{}_per_issue_active.ratio",  # cycles / issue
                  "smsp__average_warp_latency_issue_stalled_{}.ratio",
                  "smsp__warp_issue_stalled_{}_per_warp_active.pct")  # % of active warp cycles


def pick(all_path, base_path):
    def tokens(path):
        try:
            with open(path, errors="replace") as f:
                return {t.strip(",\"") for t in f.read().split()}
        except OSError:
            return set()

    # the launch__ attributes are not listed, and gpu__time_duration.sum worked on 2026-12-01
    known = lambda m: m.startswith("launch__") or m == TIME  # noqa: E731
    full = tokens(all_path)
    ok = lambda m: known(m) or m in full  # noqa: E731
    if sum(ok(m) and not known(m) for m in BASIC) < 5:  # the suffix listing failed or reads otherwise
        base = tokens(base_path) | full
        ok = lambda m: known(m) or m.split(".")[0] in base  # noqa: E731
    names = [m for m in BASIC if ok(m)]
    for fam in STALL_FAMILIES:  # the first family the device knows (>= 5 reasons)
        st = [fam.format(r) for r in STALLS if ok(fam.format(r))]
        if len(st) >= 5:
            names += st
            break
    if all(known(m) for m in names):  # nothing listed: the caller falls back to its known list
        names = []
    print(",".join(names))


SCALE = {"nsecond": 1e-3, "usecond": 1.0, "msecond": 1e3, "second": 1e6,
         "ns": 1e-3, "us": 1.0, "ms": 1e3, "s": 1e6,  # --print-units base writes these
         "byte": 1.0, "kbyte": 1e3, "mbyte": 1e6, "gbyte": 1e9, "tbyte": 1e12}


def num(s, unit=""):
    s = (s or "").replace(",", "").strip()
    try:
        v = float(s)
    except ValueError:
        return None
    return v * SCALE.get(unit.split("/")[0].strip().lower(), 1.0)


def short(name):
    name = re.sub(r"^void\s+", "", name)
    if name.endswith(")"):  # drop the parameter list: back to its matching "("
        depth = 0
        for i in range(len(name) - 1, -1, -1):
            depth += {")": 1, "(": -1}.get(name[i], 0)
            if depth == 0:
                name = name[:i]
                break
    for long_, short_ in (("cudnn_generated_fort_native_sdpa_", "cudnn_"), ("cudnn_generated_fort_native_", "cudnn_"),
                          ("(anonymous namespace)::", ""), ("_kernel0", "")):
        name = name.replace(long_, short_)
    name = re.sub(r"\s+", "", name)
    return name if len(name) <= 58 else name[:57] + "~"


def read_rows(path):
    """[(kernel name, {metric: value})] in file order; values in us / bytes / % / counts."""
    header, units, rows = None, None, []
    with open(path, newline="", errors="replace") as f:
        lines = [ln for ln in f if ln.startswith('"')]
    for r in csv.reader(lines):
        if "Kernel Name" in r and "ID" in r:
            header, units = r, None
            continue
        if header is None or len(r) != len(header):
            continue
        if units is None and not r[header.index("ID")].strip():
            units = r
            continue
        u = units or [""] * len(header)
        d = {h: num(v, u[i]) for i, (h, v) in enumerate(zip(header, r)) if "__" in h}
        rows.append((r[header.index("Kernel Name")], d))
    return rows  # each ncu run lists its kernels in launch order; runs are concatenated in order


def fmt(v, spec="{:.0f}"):
    return "-" if v is None else spec.format(v)


def stall_name(metric):
    reason = re.sub(r"^.*issue_stalled_|(_per_issue_active|_per_warp_active)?\.(ratio|pct)$", "", metric)
    return ABBR.get(reason, reason)


def line(side, k, d, gm_name):
    stalls = sorted(((v, h) for h, v in d.items() if "issue_stalled_" in h and v is not None),
                    reverse=True)
    st = " ".join(f"{stall_name(h)} {v:.1f}" for v, h in stalls[:3])
    smem = None if d.get(SMEM_DYN) is None else d[SMEM_DYN] + (d.get(SMEM_ST) or 0)
    rd, wr = d.get(RD), d.get(WR)
    gm = d.get(gm_name) if gm_name else None
    l2 = ""
    if d.get(L2TP) is not None or d.get(L2B) is not None:
        red = d.get(L2RED)
        l2 = (f" lts {fmt(d.get(L2TP))}% {fmt(None if d.get(L2B) is None else d[L2B] / 1e6)}MB"
              f" red {fmt(None if red is None else red * 32 / 1e6)}MB")
    return (f"  {side[:6]:6s} {short(k):58s} {fmt(d.get(TIME), '{:8.1f}')} "
            f"{fmt(d.get(GRID)):>5s}x{fmt(d.get(BLOCK)):<4s} r{fmt(d.get(REGS)):<3s} "
            f"{fmt(None if smem is None else smem / 1024, '{:.0f}K'):>5s} | tc {fmt(d.get(HMMA)):>2s} "
            f"gm {fmt(gm):>2s} iss {fmt(d.get(ISSUE)):>2s} occ {fmt(d.get(OCC)):>2s} | "
            f"dram {fmt(d.get(DRAM)):>2s}% {fmt(None if rd is None else rd / 1e6):>4s}/"
            f"{fmt(None if wr is None else wr / 1e6):<4s}MB L2 {fmt(d.get(L2HIT)):>2s}{l2} | {st}")


def table(pairs):
    """pairs: [(RAW.csv, DRIVE.log)], one a ncu run: its markers are named by its own SEG lines."""
    rows, cases, drive, nseg = [], {}, [], 0
    for raw_path, drive_path in pairs:
        try:
            with open(drive_path, errors="replace") as f:
                dr = f.read().splitlines()
        except OSError:
            dr = []
        drive += dr
        segs = [ln.split()[1:3] for ln in dr if ln.startswith("SEG ") and len(ln.split()) >= 3]
        nseg += len(segs)
        run = read_rows(raw_path) if os.path.exists(raw_path) else []
        rows += run
        si, cur = -1, None
        for k, d in run:
            if "spin_kernel" in k:
                si += 1
                case, side = segs[si] if si < len(segs) else (f"?{raw_path}:{si}", "?")
                cur = cases.setdefault(case, {}).setdefault(side, [])
                continue
            if cur is None:  # kernels before the first marker: not ours to attribute
                cur = cases.setdefault(f"?unmarked {raw_path}", {}).setdefault("?", [])
            cur.append((k, d))
    present = {h for _, d in rows for h, v in d.items() if v is not None}
    gm_name = next((m for m in GMMA if m in present), None)
    stall_fam = next((re.sub(r"(long_scoreboard|barrier|wait)", "*", m) for m in sorted(present)
                      if "issue_stalled_" in m), "none")
    print(f"{len(rows)} kernel results, {nseg} segments; us = ncu gpu__time_duration (caches flushed, "
          f"one launch after 4 warm-ups); tc = {HMMA.split('.')[0]} %, gm = "
          f"{gm_name.split('.')[0] if gm_name else 'none'} %, iss = issue slots %, occ = achieved "
          f"occupancy %, dram % + MB read/written, L2 hit %, top 3 stalls ({stall_fam})")
    print(f"  {'side':6s} {'kernel':58s} {'us':>8s} {'grid x blk':>10s} {'regs':4s} {'smem':>5s}")
    for case, bysides in cases.items():
        tot = {s: sum(d.get(TIME) or 0 for _, d in ks) for s, ks in bysides.items()}
        ratio = ""
        if tot.get("flashc") and tot.get("cudnn"):
            ratio = f"; cudnn/flashc = {tot['cudnn'] / tot['flashc']:.2f}"
        print(f"== {case}: " + ", ".join(f"{s} {t:.1f} us" for s, t in tot.items()) + ratio)
        for side, ks in bysides.items():
            small = [(k, d) for k, d in ks if (d.get(TIME) or 0) < 0.02 * (tot[side] or 1)]
            for k, d in ks:
                if (k, d) not in small:
                    print(line(side, k, d, gm_name))
            if small:
                print(f"  {side[:6]:6s} + {len(small)} kernel(s) under 2% of the side: "
                      f"{sum(d.get(TIME) or 0 for _, d in small):.1f} us")
    for ln in drive:
        if ln.startswith("FAILED"):
            print(ln[:300])


def kernels(path):
    """One row a kernel launch (the flushes' elementwise / fill kernels left out)."""
    rows = [(k, d) for k, d in read_rows(path) if "elementwise" not in k and "fill" not in k.lower()]
    if not rows:
        print("  (no ncu rows)")
        return
    print("| kernel | grid x block | us | DRAM rd MB | DRAM wr MB |")
    print("|---|---|--:|--:|--:|")
    for k, d in rows:
        rd, wr = d.get(RD), d.get(WR)
        print(f"| {short(k)} | {fmt(d.get(GRID))} x {fmt(d.get(BLOCK))} | "
              f"{fmt(d.get(TIME), '{:.1f}')} | {fmt(None if rd is None else rd / 1e6, '{:.1f}')} | "
              f"{fmt(None if wr is None else wr / 1e6, '{:.1f}')} |")


if __name__ == "__main__":
    if len(sys.argv) == 4 and sys.argv[1] == "pick":
        pick(sys.argv[2], sys.argv[3])
    elif len(sys.argv) == 3 and sys.argv[1] == "kernels":
        kernels(sys.argv[2])
    elif len(sys.argv) >= 4 and len(sys.argv) % 2 == 0 and sys.argv[1] == "table":
        table(list(zip(sys.argv[2::2], sys.argv[3::2])))
    else:
        sys.exit(__doc__)
