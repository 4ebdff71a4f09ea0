"""Test setup: the tests exercise the flashc package of this source tree (python/), with the
library from $FLASHC_LIBRARY or <repo>/build (see flashc._lib)."""

import os
import sys

import numpy as np
import pytest

_PKG_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if _PKG_ROOT not in sys.path:
    sys.path.insert(0, _PKG_ROOT)

import flashc  # noqa: E402
from flashc import _lib  # noqa: E402


# Fresh random inputs every run, like the C suite; FLASHC_TEST_SEED=<n> replays a run.
SEED = int(os.environ.get("FLASHC_TEST_SEED") or np.random.SeedSequence().entropy % 2**63)


def pytest_report_header(config):
    try:
        where = f"{flashc.library_path()} [{flashc.build_info()}]"
    except OSError as e:
        where = f"NOT LOADED: {e}"
    return [
        f"flashc package: {os.path.dirname(flashc.__file__)}",
        f"libflashc: {where}",
        f"FLASHC_TEST_SEED={SEED}",
    ]


@pytest.fixture
def rng(request):
    """Each test's own stream, derived from the run's seed and the test's id."""
    key = [ord(c) for c in request.node.nodeid]
    return np.random.default_rng(np.random.SeedSequence([SEED] + key))


def unsupported_detail(call):
    """None if call() returns; the library's reason if it raises FLASHC_ERR_UNSUPPORTED (any
    other error propagates)."""
    try:
        call()
    except flashc.FlashcError as e:
        if e.status == _lib.ERR_UNSUPPORTED:
            return e.detail
        raise
    return None


def c_backward_missing():
    """None if flashc_attn_bwd computes on the CPU; otherwise the library's reason. Asked at run
    time from the library: a valid float32 host problem answered FLASHC_ERR_UNSUPPORTED."""
    q = np.ones((1, 2, 1, 4), np.float32)
    out, lse, _ = flashc.flash_attn_func(q, q, q, return_attn_probs=True)
    return unsupported_detail(lambda: flashc.flash_attn_backward(out, q, q, q, out, lse))


@pytest.fixture(scope="session")
def c_backward():
    """Skips the requesting test when the linked libflashc has no CPU backward yet."""
    missing = c_backward_missing()
    if missing is not None:
        pytest.skip(f"the C backward is missing in this libflashc (flashc_attn_bwd -> "
                    f"FLASHC_ERR_UNSUPPORTED: {missing})")
