"""cffi build script (API mode) for ``koordlet.system._native``; run by setuptools via setup.py.

Declarations come from ``csrc/*.h`` and sources from ``csrc/*.c`` so the C stays in one place.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from cffi import FFI

ROOT = Path(__file__).resolve().parent.parent.parent
CSRC = ROOT / "csrc"


def _cdef_from_headers() -> str:
    text = "\n".join(p.read_text() for p in sorted(CSRC.glob("*.h")))
    text = re.sub(r"/\*.*?\*/", "", text, flags=re.S)
    return "\n".join(line for line in text.splitlines() if not line.lstrip().startswith("#"))


ffibuilder = FFI()
ffibuilder.cdef(_cdef_from_headers())
ffibuilder.set_source(
    "koordlet.system._native",
    "\n".join(f'#include "{p.name}"' for p in sorted(CSRC.glob("*.h"))),
    sources=[os.path.relpath(p, ROOT) for p in sorted(CSRC.glob("*.c"))],
    include_dirs=[os.path.relpath(CSRC, ROOT)],
    extra_compile_args=["-O2", "-Wall", "-Wextra", "-std=gnu11"],
)

if __name__ == "__main__":
    ffibuilder.compile(verbose=True)
