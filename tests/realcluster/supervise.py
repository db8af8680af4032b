"""``python -m tests.realcluster.supervise -- <argv>``: the kubelet's part for a container run as a host
process, restarting it when it exits (``restartPolicy: Always``), with a back-off doubling from one
second up to thirty (the kubelet's starts at ten: a test waiting on a restart should not take minutes).

A leader that loses its Lease exits, as kube-scheduler and controller-runtime's managers do, and counts on
this restart to follow the new leader. SIGTERM ends the child (SIGTERM, then SIGKILL after its grace
period) and then the supervisor; each restart is logged as ``supervise: restarting``.
"""

from __future__ import annotations

import signal
import subprocess
import sys
import threading
import time
from types import FrameType

GRACE = 10.0
FIRST_BACKOFF = 1.0
MAX_BACKOFF = 30.0
RESET_AFTER = 60.0  # a child that ran this long starts the back-off over


def main(argv: list[str]) -> int:
    if not argv or argv[0] != "--" or len(argv) < 2:
        print("usage: python -m tests.realcluster.supervise -- <command> [args...]", file=sys.stderr)
        return 2
    command = argv[1:]
    stop = threading.Event()
    child: list[subprocess.Popen[bytes]] = []

    def on_term(signum: int, frame: FrameType | None) -> None:
        stop.set()
        if child and child[0].poll() is None:
            child[0].send_signal(signal.SIGTERM)

    signal.signal(signal.SIGTERM, on_term)
    signal.signal(signal.SIGINT, on_term)
    backoff = FIRST_BACKOFF
    code = 0
    while not stop.is_set():
        began = time.monotonic()
        child[:] = [subprocess.Popen(command)]
        while True:
            try:
                code = child[0].wait(timeout=0.5)
                break
            except subprocess.TimeoutExpired:
                if stop.is_set():
                    try:
                        code = child[0].wait(timeout=GRACE)
                    except subprocess.TimeoutExpired:
                        child[0].kill()
                        code = child[0].wait()
                    break
        if stop.is_set():
            break
        if time.monotonic() - began > RESET_AFTER:
            backoff = FIRST_BACKOFF
        print(f"supervise: {command[0]} exited with {code}; restarting in {backoff:.0f}s", flush=True)
        if stop.wait(backoff):
            break
        backoff = min(backoff * 2, MAX_BACKOFF)
        print("supervise: restarting", flush=True)
    return code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
