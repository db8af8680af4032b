"""The kubelet's restart of an exited container, for the real cluster's host processes."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path


def test_an_exited_child_is_started_again_and_sigterm_ends_both(tmp_path: Path) -> None:
    marks = tmp_path / "starts"
    child = (
        f"import pathlib; p = pathlib.Path({str(marks)!r}); "
        "p.write_text(p.read_text() + 'x' if p.exists() else 'x')"
    )
    # The child exits at once the first time, then stays (a leader that lost its Lease, then a follower).
    script = (
        f"{child}\nimport time, pathlib\nif pathlib.Path({str(marks)!r}).read_text() != 'x': time.sleep(60)"
    )
    sup = subprocess.Popen(
        [sys.executable, "-m", "tests.realcluster.supervise", "--", sys.executable, "-c", script],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and (not marks.exists() or marks.read_text() != "xx"):
            time.sleep(0.05)
        assert marks.read_text() == "xx", "started again after its exit"
        sup.send_signal(signal.SIGTERM)
        out, _ = sup.communicate(timeout=20)
    finally:
        if sup.poll() is None:
            sup.kill()
    assert "exited with 0; restarting" in out
    assert sup.returncode is not None
