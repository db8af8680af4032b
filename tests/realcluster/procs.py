"""The cluster's processes, started detached (they outlive ``make cluster``) and ended by the stop by PID.

Each is recorded with its PID and its start time in clock ticks (``/proc/<pid>/stat`` field 22), so the
stop ends exactly the process it started: a PID reused by another process since has another start time
and is left alone.
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any


def start_ticks(pid: int) -> int | None:
    """The process's start time since boot in clock ticks; None when it is gone."""
    try:
        raw = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    # The command name (field 2) may hold spaces and parentheses: split after its last ')'.
    return int(raw[raw.rindex(")") + 2 :].split()[19])


@dataclass(frozen=True)
class Started:
    name: str
    pid: int
    ticks: int
    log: str
    argv: tuple[str, ...]
    env: tuple[tuple[str, str], ...] = ()
    """What ``spawn`` added to the inherited environment (a restart gives it again)."""
    cwd: str = ""

    def running(self) -> bool:
        if start_ticks(self.pid) != self.ticks:
            return False
        with contextlib.suppress(OSError):  # a zombie of ours: reap it, it is not running
            if os.waitpid(self.pid, os.WNOHANG)[0] == self.pid:
                return False
        try:
            state = Path(f"/proc/{self.pid}/stat").read_text()
        except OSError:
            return False
        return state[state.rindex(")") + 2] != "Z"

    def tail(self, chars: int = 4000) -> str:
        try:
            return Path(self.log).read_text(errors="replace")[-chars:]
        except OSError:
            return ""

    def stop(self, timeout: float = 15.0) -> None:
        """SIGTERM, then SIGKILL after ``timeout``; nothing when the process is gone or not ours."""
        if not self.running():
            return
        with contextlib.suppress(ProcessLookupError):
            os.kill(self.pid, signal.SIGTERM)
        deadline = time.monotonic() + timeout
        while self.running() and time.monotonic() < deadline:
            time.sleep(0.1)
        if self.running():
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.pid, signal.SIGKILL)
            deadline = time.monotonic() + 5
            while self.running() and time.monotonic() < deadline:
                time.sleep(0.05)

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, doc: Mapping[str, Any]) -> Started:
        env = tuple((str(k), str(v)) for k, v in doc.get("env", []))
        return cls(
            doc["name"],
            int(doc["pid"]),
            int(doc["ticks"]),
            doc["log"],
            tuple(doc["argv"]),
            env,
            doc.get("cwd", ""),
        )

    def again(self) -> Started:
        """The same command started anew (after :meth:`stop`), appending to the same log."""
        return spawn(
            self.name,
            self.argv,
            Path(self.log).parent,
            env=dict(self.env),
            cwd=Path(self.cwd) if self.cwd else None,
        )


def spawn(
    name: str,
    argv: Sequence[str],
    logs: Path,
    *,
    env: Mapping[str, str] | None = None,
    cwd: Path | None = None,
) -> Started:
    """Start ``argv`` in its own session, stdout and stderr to ``<logs>/<name>.log``, stdin closed."""
    logs.mkdir(parents=True, exist_ok=True)
    log = logs / f"{name}.log"
    with log.open("ab") as out:
        proc = subprocess.Popen(
            list(argv),
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            env={**os.environ, **(env or {})},
            cwd=cwd,
            start_new_session=True,  # a Ctrl-C at the terminal that ran make reaches none of them
        )
    ticks = start_ticks(proc.pid)
    if ticks is None:
        raise RuntimeError(f"{name} exited at once:\n{log.read_text(errors='replace')[-3000:]}")
    extra = tuple(sorted((env or {}).items()))
    return Started(name, proc.pid, ticks, str(log), tuple(argv), extra, str(cwd or ""))


def wait_until(
    what: str,
    cond: Callable[[], object],
    timeout: float,
    *,
    watch: Sequence[Started] = (),
    every: float = 0.2,
) -> None:
    """Poll ``cond`` until it is true; fail naming ``what`` (with the log of a watched process that died)."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            if cond():
                return
        except Exception:  # a probe that raises is a probe that says "not yet"
            pass
        for p in watch:
            if not p.running():
                raise RuntimeError(f"{p.name} exited while waiting for {what}; its log ends:\n{p.tail()}")
        if time.monotonic() > deadline:
            logs = "".join(f"\n--- {p.name}:\n{p.tail(2000)}" for p in watch)
            raise TimeoutError(f"{what}: not reached in {timeout:.0f}s{logs}")
        time.sleep(every)


_SERVING = re.compile(r"serving HTTP on port (\d+)")


def last_port(p: Started, *, after: int = 0) -> int | None:
    """The port our process announced last in its log (past byte ``after``); None before it did."""
    try:
        text = Path(p.log).read_text(errors="replace")[after:]
    except OSError:
        return None
    found = _SERVING.findall(text)
    return int(found[-1]) if found else None
