"""Checks of libflashc.so as a loader sees it (ctest: libflashc_exports, libflashc_loads).

  check_shared_lib.py exports LIB HEADER   the dynamic symbol table holds exactly the functions
                                           flashc.h declares (flashc_*), nothing internal
                                           (flashc__*, cpu_*, ref_*, attn_*, cuda*, C++ ...)
  check_shared_lib.py loads LIB            no libcudart/libcuda among the NEEDED libraries; loads
                                           with the CUDA runtime hidden from the loader (no
                                           LD_LIBRARY_PATH and no /etc/ld.so.cache, which lists
                                           /usr/local/lib's libcudart on a machine with the
                                           toolkit: only the system's own directories remain);
                                           flashc_version() and flashc_cuda_available() answer,
                                           the latter 0 when no CUDA driver (libcuda.so.1) loads
Exits 1 with the reason on a failure.
"""

import ctypes
import os
import re
import subprocess
import sys


def fail(msg):
    print("FAIL:", msg)
    sys.exit(1)


def declared_functions(header):
    text = open(header).read()
    text = re.sub(r"/\*.*?\*/", " ", text, flags=re.S)
    text = re.sub(r"//[^\n]*", " ", text)
    text = text.replace("\\\n", " ")  # a macro's continuation lines belong to its #define
    text = "\n".join(line for line in text.splitlines() if not line.lstrip().startswith("#"))
    names = set(re.findall(r"\b(flashc_[A-Za-z0-9_]+)\s*\(", text))
    # static inline helpers (if the header ever grows some) are not exported symbols
    inline = set(re.findall(r"\bstatic\s+inline\b[^;{]*?\b(flashc_[A-Za-z0-9_]+)\s*\(", text))
    return names - inline


def exports(lib, header):
    out = subprocess.run(["nm", "-D", "--defined-only", lib], capture_output=True, text=True, check=True).stdout
    syms = {}
    for line in out.splitlines():
        parts = line.split()
        if len(parts) >= 2:
            syms[parts[-1].split("@")[0]] = parts[-2]
    internal = sorted(s for s in syms if not re.match(r"flashc_[A-Za-z0-9]", s))
    if internal:
        fail(f"{lib} exports {len(internal)} symbols outside the API: {' '.join(internal)}")
    declared = declared_functions(header)
    missing = sorted(declared - set(syms))
    extra = sorted(set(syms) - declared)
    if missing:
        fail(f"declared in {header} but not exported: {' '.join(missing)}")
    if extra:
        fail(f"exported but not declared in {header}: {' '.join(extra)}")
    print(f"{lib}: {len(syms)} exported symbols, all flashc_* and declared in flashc.h")


def interpreter(exe):
    """The ELF interpreter (ld.so) of exe, to run it with --inhibit-cache; None if not ELF."""
    res = subprocess.run(["readelf", "-l", exe], capture_output=True, text=True)
    m = re.search(r"Requesting program interpreter: ([^\]]+)\]", res.stdout)
    return m.group(1) if m else None


def loads(lib):
    dyn = subprocess.run(["readelf", "-d", lib], capture_output=True, text=True, check=True).stdout
    needed = re.findall(r"\(NEEDED\)\s+Shared library: \[([^\]]+)\]", dyn)
    cuda = [n for n in needed if re.match(r"lib(cudart|cuda)\.so", n)]
    if cuda:
        fail(f"{lib} needs {' '.join(cuda)}: it would not load on a host without CUDA")
    print(f"NEEDED: {' '.join(needed)}")
    # A child with no LD_LIBRARY_PATH (no CUDA directories on the loader's path).
    code = f"""
import ctypes
lib = ctypes.CDLL({lib!r})
lib.flashc_version.restype = ctypes.c_char_p
lib.flashc_build_info.restype = ctypes.c_char_p
try:
    ctypes.CDLL("libcuda.so.1")
    driver = 1
except OSError:
    driver = 0
print(lib.flashc_version().decode(), lib.flashc_cuda_available(), driver, lib.flashc_build_info().decode())
"""
    env = {k: v for k, v in os.environ.items() if k not in ("LD_LIBRARY_PATH", "LD_PRELOAD")}
    # A sanitizer build (FLASHC_SANITIZE) loads into Python only with its runtimes preloaded.
    ldd = subprocess.run(["ldd", lib], capture_output=True, text=True).stdout
    preload = re.findall(r"=>\s+(\S*lib(?:asan|ubsan)\.so\S*)", ldd)
    if preload:
        env["LD_PRELOAD"] = ":".join(preload)
        env["ASAN_OPTIONS"] = "detect_leaks=0"
    ldso = interpreter(os.path.realpath(sys.executable))
    if ldso is None:
        fail(f"cannot find the ELF interpreter of {sys.executable}")
    cmd = [ldso, "--inhibit-cache", os.path.realpath(sys.executable), "-c", code]
    res = subprocess.run(cmd, env=env, capture_output=True, text=True)
    if res.returncode != 0:
        fail(f"loading {lib} with the CUDA runtime hidden failed: {res.stderr.strip()}")
    version, available, driver, info = res.stdout.strip().split(" ", 3)
    print(f"loaded without LD_LIBRARY_PATH and ld.so.cache: version {version}, cuda_available {available}, "
          f"driver {'present' if driver == '1' else 'absent'}: {info}")
    if driver == "0" and available != "0":
        fail("flashc_cuda_available() is nonzero on a host without a CUDA driver")


if __name__ == "__main__":
    if len(sys.argv) == 4 and sys.argv[1] == "exports":
        exports(sys.argv[2], sys.argv[3])
    elif len(sys.argv) == 3 and sys.argv[1] == "loads":
        loads(sys.argv[2])
    else:
        fail(__doc__)
