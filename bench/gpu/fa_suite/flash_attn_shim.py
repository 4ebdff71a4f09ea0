"""The `flash_attn` package as flash-attention's own test file imports it, served by flashc.

bench/gpu/fa_suite.sh builds a folder `flash_attn/` whose __init__ is this file, beside the peer's
own pure-Python helpers taken from its source distribution (bert_padding.py, layers/rotary.py and
ops/triton/rotary.py: the test file's references use them, so they stay the peer's). Only the
attention entry points come from flashc; nothing here changes a result.
"""
from flashc import (  # noqa: F401  (re-exported under flash-attn's names)
    flash_attn_func,
    flash_attn_kvpacked_func,
    flash_attn_qkvpacked_func,
    flash_attn_varlen_func,
    flash_attn_varlen_kvpacked_func,
    flash_attn_varlen_qkvpacked_func,
    flash_attn_with_kvcache,
)

__version__ = "flashc"
