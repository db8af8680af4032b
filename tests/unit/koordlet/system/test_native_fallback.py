"""The package imports and works with the compiled module absent (no compiler at install time)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from tests.support.paths import ROOT

SCRIPT = r"""
import json, sys
sys.modules["koordlet.system._native"] = None  # makes "import koordlet.system._native" fail
from koordlet.system import native
from koordlet.system.batchread import FileKind
d = sys.argv[1]
from pathlib import Path
Path(d, "usage").write_text("42\n")
Path(d, "stat").write_text("x 1\ny 2\n")
reader = native.open_batch_reader([d + "/usage", d + "/stat", d + "/nope"],
                                  [FileKind.COUNTER, FileKind.KEY_VALUE, FileKind.COUNTER], [(), ("y",), ()])
res = reader.read()
errs = native.write_batch([(d + "/usage", "7"), (d + "/nope/x", "1")])
print(json.dumps({"has_native": native.HAS_NATIVE,
                  "reader": type(reader).__name__, "status": res.status,
                  "values": [res.value(0), res.value(1, 0)],
                  "errs": errs, "usage": Path(d, "usage").read_text()}))
"""


def test_works_without_compiled_module(tmp_path: Path) -> None:
    out = subprocess.run(
        [sys.executable, "-c", SCRIPT, str(tmp_path)],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
        cwd=ROOT,
    )
    got = json.loads(out.stdout.strip().splitlines()[-1])
    assert got["has_native"] is False
    assert got["reader"] == "PyBatchReader"
    assert got["status"] == [0, 0, -2]
    assert got["values"] == [42, 2]
    assert got["errs"] == [0, 2]
    assert got["usage"] == "7"
