"""The only importer of the cffi module ``koordlet.system._native``.

When the compiled module is absent (no compiler at install time), ``HAS_NATIVE`` is False and callers use
the pure-Python fallbacks; ``koordlet version`` reports which is in use.
"""

from __future__ import annotations

try:
    from koordlet.system import _native

    HAS_NATIVE = True
except ImportError:  # pragma: no cover - exercised by the fallback test in a subprocess
    _native = None
    HAS_NATIVE = False


def abi_version() -> int:
    """The C helpers' ABI version, or 0 without the compiled module."""
    if _native is None:
        return 0
    return int(_native.lib.kn_abi_version())
