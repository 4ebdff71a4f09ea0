"""bench/gpu/alt_cells.py — the per-cell table that np_table.py and pad_table.py share: one alt
instance of bench_fwd11.py (--alt ALT:...) against the default ("flashc") in every cell of a
--set cells-style run (head dim, mask, seqlen), in CUPTI kernel time and under do_bench's L2
flush, each against SDPA cuDNN, and TFLOP/s; each script applies its own rule to the result."""


def alt_cells(rows, alt, base, name_col=False, show=True, base_impl="flashc"):
    """Prints the table (columns named ALT/BASE; show=False: not) and returns {(d, causal):
    [(Sq, rk, rf, name)]}: rk, rf = base_impl's time (the default instance, "flashc", unless
    named) / alt's (kernel, flush; None where a measure is missing), name = the kernel alt
    launched (name_col: also a column)."""
    out = print if show else (lambda *a, **k: None)
    get = lambda r, n, k: r.get(n, {}).get(k)
    q = lambda a, b: a / b if a and b else None
    f3 = lambda x: f"{x:.3f}" if x else "nan"
    tf = lambda r, us: f"{r['flops'] / (us * 1e-6) / 1e12:.0f}" if us else "nan"
    a = f"flashc_{alt}"
    out(f"| d | causal | S | {alt}/{base} kernel | {alt}/{base} flush | {base}/cuDNN"
          f"{' kernel' if not name_col else ''} | {alt}/cuDNN{' kernel' if not name_col else ''} | "
          f"{base} TF | {alt} TF | cuDNN TF | FA2 TF |" + (f" {alt}'s kernel |" if name_col else ""))
    out("|---" * (12 if name_col else 11) + "|")
    groups = {}
    for r in sorted(rows, key=lambda r: (-r["d"], r["causal"], r["Sq"])):
        kd, ka, kc = (get(r, n, "kern_us") for n in (base_impl, a, "cudnn"))
        rk, rf = q(kd, ka), q(get(r, base_impl, "flush"), get(r, a, "flush"))
        name = (get(r, a, "main") or "?").replace("void ", "").replace(
            "(anonymous namespace)::", "")[:40]
        out(f"| {r['d']} | {int(r['causal'])} | {r['Sq']} | {f3(rk)} | {f3(rf)} | "
              f"{f3(q(kc, kd))} | {f3(q(kc, ka))} | {tf(r, kd)} | {tf(r, ka)} | {tf(r, kc)} | "
              f"{tf(r, get(r, 'flash', 'kern_us'))} |" + (f" {name} |" if name_col else ""))
        groups.setdefault((r["d"], r["causal"]), []).append((r["Sq"], rk, rf, name))
    return groups


def meets(rk, rf, kernel_min, flush_min):
    """Both ratios measured and at or above their bounds."""
    return rk is not None and rf is not None and rk >= kernel_min and rf >= flush_min
