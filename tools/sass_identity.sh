#!/usr/bin/env bash
# sass_identity.sh: proves that a CUDA refactor leaves the device code unchanged, without a GPU.
#
#   tools/sass_identity.sh [-B build_dir] [-o out_dir] [-m sed_expr] A B [file.cu ...]
#
# A and B are git revisions, or `WORKTREE` for the checkout as it is (uncommitted edits included).
# Each .cu (default: every nvcc object of compile_commands.json, i.e. src/cuda/*.cu,
# src/cp/cp_nccl.cu, tools/cuda/*.cu) is compiled at both with the build's own nvcc command line
# (same -gencode list, -O3, defines, includes; only the source tree differs), plus -Xptxas -v.
# Per object it then compares, for every arch (sm_80, sm_90a) and every function:
#   - the SASS (cuobjdump -sass), function by function, sorted by name: addresses are relative to
#     the function, so an identical instruction stream gives identical text, encodings included;
#   - the resource usage (cuobjdump -res-usage: registers, stack, shared, local, constant banks);
#   - the ptxas -v report (registers, barriers, spill stores/loads, stack frame, smem, cmem).
# Prints one line per object with the function count compared and `identical` or `DIFFERS`, and
# exits 1 if anything differs. Diffs are left under out_dir/diff/.
# -m sed_expr: a renaming applied to A's function names before the comparison, for a refactor
#   that renames or moves a kernel (its instruction stream must still match to the bit), e.g.
#   -m 's/_Z27attn_fwd_sm80_clear_unownedI\(\w*\)Ev13attn_fwd_args/.../'. Records are sorted
#   again after it.
#
# build_dir: a configured CMake build with the CUDA backend and compile_commands.json
#   (cmake -S . -B build-sass -DCMAKE_BUILD_TYPE=Release -DCMAKE_EXPORT_COMPILE_COMMANDS=ON);
#   default build-sass. The compile is the Release one: the SASS that ships.
# out_dir: default /tmp/sass_identity. A git revision's results are cached under out_dir/<sha>/
#   (so the "before" side is compiled once per revision); WORKTREE is always recompiled.
# cuobjdump: $CUOBJDUMP, else PATH, else next to nvcc. Where the toolkit lacks it (a minimal
#   nvcc install), `pip install nvidia-cuda-cuobjdump nvidia-cuda-nvdisasm` in a venv and point
#   CUOBJDUMP at its cuobjdump (nvdisasm, which -sass needs, is then found beside it).
# Compiles are serial and niced: a big .cu takes minutes on a small box.
# Seen with nvcc 13.0: a __forceinline__ device helper is not free. A kernel's whole body moved
#   into one, or a loop's accumulators passed by reference, came out reordered or renumbered in
#   the PTX and so in the SASS; a helper over a self-contained loop, or a one-line accessor, did
#   not. Where a helper changes the SASS, one kernel template over the argument struct can keep
#   a body verbatim (attn_clear_unowned). A quick first look: `nvcc -ptx` of both versions (one
#   arch, no ptxas) and a diff of the entries in question.
set -euo pipefail

build=build-sass
out=/tmp/sass_identity
map=""
while getopts "B:o:m:h" opt; do
    case $opt in
    B) build=$OPTARG ;;
    o) out=$OPTARG ;;
    m) map=$OPTARG ;;
    *) sed -n '2,36p' "$0"; exit 2 ;;
    esac
done
shift $((OPTIND - 1))
[ $# -ge 2 ] || { sed -n '2,36p' "$0"; exit 2; }
rev_a=$1 rev_b=$2
shift 2

root=$(git rev-parse --show-toplevel)
cd "$root"
build=$(cd "$build" && pwd)
ccj=$build/compile_commands.json
[ -f "$ccj" ] || { echo "sass_identity: $ccj missing (configure with -DCMAKE_EXPORT_COMPILE_COMMANDS=ON)" >&2; exit 2; }
nvcc_dir=$(dirname "$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)")
cuobjdump=${CUOBJDUMP:-$(command -v cuobjdump || echo "$nvcc_dir/cuobjdump")}
[ -x "$cuobjdump" ] || { echo "sass_identity: no cuobjdump (set CUOBJDUMP; pip install nvidia-cuda-cuobjdump)" >&2; exit 2; }
# cuobjdump -sass runs nvdisasm: look for it next to cuobjdump too (the pip wheels' layout).
command -v nvdisasm >/dev/null 2>&1 || export PATH="$PATH:$(dirname "$cuobjdump")"
mkdir -p "$out"

files=("$@")
if [ ${#files[@]} -eq 0 ]; then
    mapfile -t files < <(python3 - "$ccj" "$root" <<'EOF'
import json, os, sys
for e in json.load(open(sys.argv[1])):
    if "nvcc" in e["command"].split()[0]:
        print(os.path.relpath(e["file"], sys.argv[2]))
EOF
)
fi

# tree REV: prints a directory holding the sources of REV (the worktree itself for WORKTREE).
tree() {
    if [ "$1" = WORKTREE ]; then echo "$root"; return; fi
    local sha dir
    sha=$(git rev-parse --verify "$1^{commit}")
    dir=$out/$sha/src
    if [ ! -d "$dir" ]; then
        mkdir -p "$dir.tmp"
        git archive "$sha" | tar -x -C "$dir.tmp"
        mv "$dir.tmp" "$dir"
    fi
    echo "$dir"
}

# build_one REV FILE: FILE of REV compiled (unless cached) into out/<key>/<name>.{o,ptxas,sass,res}
# and normalized into <name>.norm.
build_one() {
    local rev=$1 f=$2 src key dst name
    src=$(tree "$rev")
    if [ "$rev" = WORKTREE ]; then key=worktree; else key=$(git rev-parse --verify "$rev^{commit}"); fi
    dst=$out/$key
    name=$(echo "$f" | tr / _)
    mkdir -p "$dst"
    rm -f "$dst/$name.norm"
    [ -f "$src/$f" ] || { echo "sass_identity: $f absent at $rev" >&2; : > "$dst/$name.norm"; return; }
    if [ "$key" = worktree ] || [ ! -f "$dst/$name.ok" ]; then
        compile_one "$rev" "$f" "$src" "$dst/$name"
    fi
    normalize "$dst/$name"
}

# compile_one REV FILE SRC_TREE OUT_BASE: the object and its three reports.
compile_one() {
    local rev=$1 f=$2 src=$3 base=$4
    rm -f "$base.ok"
    local cmd
    cmd=$(python3 - "$ccj" "$root" "$src" "$f" "$base.o" <<'EOF'
import json, os, shlex, sys
ccj, root, src, f, obj = sys.argv[1:]
for e in json.load(open(ccj)):
    if os.path.relpath(e["file"], root) != f:
        continue
    args = shlex.split(e["command"])
    outa = []
    i = 0
    while i < len(args):
        a = args[i]
        if a == "--options-file":          # CMake's includes .rsp: inline it
            rsp = os.path.join(e["directory"], args[i + 1])
            outa += shlex.split(open(rsp).read())
            i += 2
            continue
        if a == "-o":
            outa += ["-o", obj]
            i += 2
            continue
        outa.append(a)
        i += 1
    # Only the source tree changes: the build dir's generated headers (flashc_version.h) stay.
    outa = [a.replace(root + "/", src + "/") if not a.startswith("-I" + os.path.dirname(ccj)) and
            not a.startswith('-I"' + os.path.dirname(ccj)) else a for a in outa]
    outa.append("-Xptxas=-v")
    print("cd " + shlex.quote(e["directory"]) + " && nice -n 10 " + " ".join(shlex.quote(a) for a in outa))
    break
EOF
)
    [ -n "$cmd" ] || { echo "sass_identity: $f not in $ccj" >&2; exit 2; }
    echo "  compiling $f at $rev" >&2
    if ! (eval "$cmd") > "$base.ptxas" 2>&1; then
        cat "$base.ptxas" >&2
        echo "sass_identity: compile of $f at $rev failed" >&2
        exit 1
    fi
    "$cuobjdump" -sass "$base.o" > "$base.sass"
    "$cuobjdump" -res-usage "$base.o" > "$base.res"
    touch "$base.ok"
}

# normalize OUT_BASE: OUT_BASE.norm from the three reports.
normalize() {
    python3 - "$1" <<'EOF'
# Normalizes the three reports into one text, sorted by (arch, function): the order in which
# nvcc's parallel ptxas runs print, or the order of functions inside a cubin, is not code. The
# one name part that is not code either: the hash nvcc gives a file's anonymous namespace
# (_GLOBAL__N__<8 hex>_..., it changes between two compiles of the same source), shown as ####.
import re, sys
base = sys.argv[1]
anon = re.compile(r"_GLOBAL__N__[0-9a-f]{8}_")
def norm(line):
    return anon.sub("_GLOBAL__N__####_", line.strip())
recs = {}
def rec(key):
    return recs.setdefault(key, {"sass": [], "res": [], "ptxas": []})
arch = fn = None
for line in open(base + ".sass"):
    m = re.match(r"\s*code for (sm_\w+)", line)
    if m:
        arch, fn = m.group(1), None
        continue
    m = re.match(r"\s*Function : (\S+)", line)
    if m:
        fn = norm(m.group(1))
        rec((arch, fn))
        continue
    if fn and line.strip().startswith("/*"):  # an instruction and its encoding
        rec((arch, fn))["sass"].append(norm(line))
arch = cur = None
for line in open(base + ".res"):
    m = re.search(r"arch = (sm_\w+)", line)
    if m:
        arch = m.group(1)
        continue
    m = re.match(r"\s*(?:Function (\S+)|(Common)):\s*$", line)
    if m:
        cur = rec((arch, norm(m.group(1) or "<common>")))["res"]
        continue
    if cur is not None and re.match(r"\s*[A-Z]+(\[\d+\])?:\d", line):
        cur.append(norm(line))
# ptxas -v: "Compiling entry function 'X' for 'sm_80'", "Function properties for X" (X or a
# subroutine of it), its stack/spill line, "Used N registers, ... smem, cmem". The -warn-spills
# warnings come on stderr, out of step with stdout: kept as one sorted list.
cur = None
warnings = []
for line in open(base + ".ptxas"):
    if "ptxas warning" in line:
        warnings.append(norm(line))
        continue
    m = re.search(r"Compiling entry function '(\S+)' for '(sm_\w+)'", line)
    if m:
        cur = (m.group(2), norm(m.group(1)))
        continue
    m = re.search(r"Function properties for (\S+)", line)
    if m and cur:
        cur = (cur[0], norm(m.group(1)))
        continue
    if cur and ("bytes stack frame" in line or "Used " in line):
        rec(cur)["ptxas"].append(norm(line))
with open(base + ".norm", "w") as o:
    for (a, f) in sorted(recs, key=lambda k: (k[0] or "", k[1])):
        r = recs[(a, f)]
        o.write(f"=== {a} {f}\n")
        for k in ("res", "ptxas"):
            for l in r[k]:
                o.write(f"{k}: {l}\n")
        for l in r["sass"]:
            o.write(l + "\n")
    o.write("=== ptxas warnings\n")
    for l in sorted(warnings):
        o.write(l + "\n")
EOF
}

ka=$rev_a; [ "$ka" = WORKTREE ] || ka=$(git rev-parse --verify "$rev_a^{commit}")
kb=$rev_b; [ "$kb" = WORKTREE ] || kb=$(git rev-parse --verify "$rev_b^{commit}")
[ "$ka" = WORKTREE ] && ka=worktree
[ "$kb" = WORKTREE ] && kb=worktree
mkdir -p "$out/diff"
status=0
for f in "${files[@]}"; do
    build_one "$rev_a" "$f"
    build_one "$rev_b" "$f"
    name=$(echo "$f" | tr / _)
    na=$out/$ka/$name.norm nb=$out/$kb/$name.norm
    if [ -n "$map" ]; then
        sed -e "$map" "$na" | python3 -c '
# Sorts the records again (and the warnings list) after a renaming.
import sys
recs, cur = {}, None
for line in sys.stdin:
    if line.startswith("=== "):
        cur = recs.setdefault(line, [])
    else:
        cur.append(line)
for h in sorted(recs, key=lambda h: (h == "=== ptxas warnings\n", h)):
    sys.stdout.write(h)
    sys.stdout.writelines(sorted(recs[h]) if h == "=== ptxas warnings\n" else recs[h])
' > "$na.mapped"
        na=$na.mapped
    fi
    count() { grep '^=== sm' "$1" | grep -vc ' <common>$' || true; }
    per_arch() { grep '^=== sm' "$1" | grep -v ' <common>$' | awk '{print $2}' | sort | uniq -c | awk '{printf "%s %s:%s", sep, $2, $1; sep=","}'; }
    if cmp -s "$na" "$nb"; then
        printf '%-34s %4s functions (%s) identical\n' "$f" "$(count "$na")" "$(per_arch "$na")"
        rm -f "$out/diff/$name.diff"
    else
        diff -u "$na" "$nb" > "$out/diff/$name.diff" || true
        printf '%-34s %4s vs %4s functions DIFFERS (%s)\n' "$f" "$(count "$na")" "$(count "$nb")" "$out/diff/$name.diff"
        status=1
    fi
done
exit $status
