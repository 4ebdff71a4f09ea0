"""Loading the library, the ctypes mirror of flashc.h, and the small runtime functions."""

import ctypes
import os
import shutil
import subprocess
import sys
import textwrap

import pytest

import flashc
from flashc import _lib

PKG_DIR = os.path.dirname(os.path.abspath(flashc.__file__))
HEADER = os.path.join(os.path.dirname(os.path.dirname(PKG_DIR)), "include", "flashc.h")


def run_python(code, env_update, cwd, pythonpath):
    env = {k: v for k, v in os.environ.items() if k not in ("FLASHC_LIBRARY", "PYTHONPATH")}
    env.update(env_update)
    env["PYTHONPATH"] = pythonpath
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)], env=env, cwd=cwd, capture_output=True, text=True
    )


def test_import_never_loads_and_a_bad_path_is_reported(tmp_path):
    missing = str(tmp_path / "nowhere" / "libflashc.so")
    res = run_python(
        """
        import flashc, flashc._lib as L
        assert L._lib is None, "import loaded the library"
        try:
            flashc.build_info()
        except OSError as e:
            print("OSError:", e)
        """,
        {"FLASHC_LIBRARY": missing},
        str(tmp_path),
        os.path.dirname(PKG_DIR),
    )
    assert res.returncode == 0, res.stderr
    assert "OSError: flashc: FLASHC_LIBRARY=" + missing in res.stdout


def test_outside_the_source_tree_every_place_is_listed(tmp_path):
    # a copy of the package with no repository around it and no FLASHC_LIBRARY
    shutil.copytree(PKG_DIR, tmp_path / "flashc", ignore=shutil.ignore_patterns("__pycache__"))
    code = """
        import ctypes.util, flashc
        if ctypes.util.find_library("flashc"):
            print("SYSTEM-HAS-IT")
        else:
            try:
                flashc.cuda_available()
            except OSError as e:
                print("OSError:", e)
        """
    res = run_python(code, {"LD_LIBRARY_PATH": ""}, str(tmp_path), str(tmp_path))
    assert res.returncode == 0, res.stderr
    if "SYSTEM-HAS-IT" in res.stdout:
        pytest.skip("a system libflashc is installed; the failure path cannot be exercised")
    out = res.stdout
    assert "FLASHC_LIBRARY (not set)" in out
    assert "not running from a source tree" in out
    assert 'find_library("flashc")' in out
    assert "libflashc.so via the dynamic loader" in out or "flashc.dll" in out


def test_flashc_library_env_is_used(tmp_path):
    path = flashc.library_path()
    res = run_python(
        "import flashc; print(flashc.library_path())",
        {"FLASHC_LIBRARY": path},
        str(tmp_path),
        os.path.dirname(PKG_DIR),
    )
    assert res.returncode == 0, res.stderr
    assert res.stdout.strip() == path


@pytest.mark.skipif(not os.path.isfile(HEADER) or not shutil.which("cc"), reason="needs include/flashc.h and cc")
def test_ctypes_layouts_match_the_header(tmp_path):
    """Sizes and offsets of the ctypes structs against what a C compiler makes of flashc.h."""
    structs = {
        "flashc_tensor": (_lib.Tensor, ["data", "dtype", "device", "ndim", "shape", "stride"]),
        "flashc_attn_params": (
            _lib.AttnParams,
            ["struct_size", "has_softmax_scale", "softmax_scale", "causal", "window_left",
             "window_right", "softcap", "alibi_slopes", "block_q", "block_k", "num_threads",
             "num_splits", "deterministic", "workspace", "workspace_bytes", "cuda_stream"],
        ),
        "flashc_attn_stats": (_lib.AttnStats, ["tile_pairs", "tile_pairs_total", "block_q", "block_k"]),
        "flashc_mem_stats": (_lib.MemStats, ["current_bytes", "peak_bytes", "alloc_count"]),
    }
    enums = [
        "FLASHC_F32", "FLASHC_F16", "FLASHC_BF16", "FLASHC_DEVICE_CPU", "FLASHC_DEVICE_CUDA",
        "FLASHC_MAX_DIMS", "FLASHC_ERR_NULL_POINTER", "FLASHC_ERR_INVALID_SHAPE",
        "FLASHC_ERR_INVALID_STRIDE", "FLASHC_ERR_HEAD_MISMATCH", "FLASHC_ERR_DIM_MISMATCH",
        "FLASHC_ERR_DTYPE_MISMATCH", "FLASHC_ERR_UNSUPPORTED_DTYPE", "FLASHC_ERR_OVERLAP",
        "FLASHC_ERR_OVERFLOW", "FLASHC_ERR_INVALID_ARGUMENT", "FLASHC_ERR_OUT_OF_MEMORY",
        "FLASHC_ERR_UNSUPPORTED", "FLASHC_ERR_DEVICE",
    ]
    lines = ['#include "flashc.h"', "#include <stdio.h>", "#include <stddef.h>", "int main(void) {"]
    for cname, (_, fields) in structs.items():
        lines.append(f'printf("{cname} %zu\\n", sizeof({cname}));')
        for f in fields:
            lines.append(f'printf("{cname}.{f} %zu\\n", offsetof({cname}, {f}));')
    for e in enums:
        lines.append(f'printf("{e} %d\\n", (int){e});')
    lines.append('printf("enum %zu\\n", sizeof(flashc_status));')
    lines.append("return 0; }")
    src = tmp_path / "abi.c"
    src.write_text("\n".join(lines))
    exe = tmp_path / "abi"
    subprocess.run(["cc", "-I", os.path.dirname(HEADER), str(src), "-o", str(exe)], check=True)
    c = dict(line.rsplit(" ", 1) for line in subprocess.run([str(exe)], capture_output=True, text=True, check=True).stdout.splitlines())

    for cname, (cls, fields) in structs.items():
        assert int(c[cname]) == ctypes.sizeof(cls), cname
        for f in fields:
            assert int(c[f"{cname}.{f}"]) == getattr(cls, f).offset, f"{cname}.{f}"
    assert int(c["enum"]) == ctypes.sizeof(ctypes.c_int)
    py = {
        "FLASHC_F32": _lib.F32, "FLASHC_F16": _lib.F16, "FLASHC_BF16": _lib.BF16,
        "FLASHC_DEVICE_CPU": _lib.DEVICE_CPU, "FLASHC_DEVICE_CUDA": _lib.DEVICE_CUDA,
        "FLASHC_MAX_DIMS": _lib.MAX_DIMS,
    }
    for e in enums:
        want = py[e] if e in py else getattr(_lib, e[len("FLASHC_"):])
        assert int(c[e]) == want, e


def test_status_names_and_exception_classes():
    lib = _lib.library()
    assert lib.flashc_status_string(_lib.ERR_HEAD_MISMATCH) == b"head count mismatch"
    mapping = {
        _lib.ERR_UNSUPPORTED_DTYPE: TypeError,
        _lib.ERR_DTYPE_MISMATCH: TypeError,
        _lib.ERR_INVALID_SHAPE: ValueError,
        _lib.ERR_HEAD_MISMATCH: ValueError,
        _lib.ERR_DIM_MISMATCH: ValueError,
        _lib.ERR_UNSUPPORTED: NotImplementedError,
        _lib.ERR_OUT_OF_MEMORY: MemoryError,
        _lib.ERR_DEVICE: RuntimeError,
        _lib.ERR_NULL_POINTER: RuntimeError,
    }
    for status, cls in mapping.items():
        e = _lib.exception_for(status, "detail text")
        assert isinstance(e, cls) and isinstance(e, flashc.FlashcError)
        assert e.status == status and "detail text" in str(e)


def test_runtime_functions():
    assert flashc.build_info().startswith(flashc.__version__ + " (cpu: ")
    assert isinstance(flashc.cuda_available(), bool)
    try:
        flashc.set_num_threads(3)
        assert flashc.get_num_threads() == 3
    finally:
        flashc.set_num_threads(0)  # back to OpenMP's default
    stats = flashc.mem_stats()
    assert set(stats) == {"current_bytes", "peak_bytes", "alloc_count"}
    assert stats["peak_bytes"] >= stats["current_bytes"] >= 0


def test_torch_is_not_imported_for_numpy(tmp_path):
    res = run_python(
        """
        import sys, numpy as np, flashc
        q = np.ones((1, 3, 2, 8), np.float32)
        flashc.flash_attn_func(q, q, q)
        flashc.rms_norm(q, np.ones(8, np.float32))
        print("torch" in sys.modules)
        """,
        {"FLASHC_LIBRARY": flashc.library_path()},
        str(tmp_path),
        os.path.dirname(PKG_DIR),
    )
    assert res.returncode == 0, res.stderr
    assert res.stdout.strip() == "False"
