"""The loop's processes: each component a child process with its log file, started with the flags and
configuration the loop needs, checked ready, and stopped (SIGTERM, then SIGKILL) whatever happens.

The test API server is the embedded default: ``python -m tests.apiserver`` on a free port, writing the
kubeconfig every other process uses. Agents run in cluster mode, one per simulated node: its own
``NODE_NAME``, kubepods parent (``--cgroup-root``), ``/proc`` view (``--proc-root-dir``), kubelet port, state
directory and HTTP port.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import IO, Any, Protocol

import yaml

from koordlet.testing.agent import Agent, http_get
from koordshared.testing.ports import EPHEMERAL, port_from_log
from tests.support.paths import ROOT


def http_ok(url: str) -> bool:
    try:
        return http_get(url, timeout=1.0)[0] == 200
    except OSError:
        return False


class Proc:
    """One component process; its stdout and stderr go to ``<logs>/<name>.log``. ``follow`` is called
    with each new log line (from a reader thread) so the loop can narrate what the component decided."""

    def __init__(
        self,
        name: str,
        argv: Sequence[str],
        logs: Path,
        *,
        env: Mapping[str, str] | None = None,
        follow: Callable[[str, str], None] | None = None,
        stdout_first_line: bool = False,
    ) -> None:
        self.name = name
        self.log_path = logs / f"{name}.log"
        self._log: IO[str] = self.log_path.open("w")
        self.first_line = ""
        self.proc = subprocess.Popen(
            list(argv),
            cwd=ROOT,
            env={**os.environ, "PYTHONPATH": str(ROOT), **(env or {})},
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            start_new_session=True,  # a Ctrl-C at the terminal reaches the loop only; it stops them
        )
        self._follow = follow
        self._first = threading.Event()
        self._want_first = stdout_first_line
        self._reader = threading.Thread(target=self._read, name=f"log-{name}", daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self._log.write(line)
            self._log.flush()
            if not self._first.is_set():
                self.first_line = line.strip()
                self._first.set()
            if self._follow is not None:
                with contextlib.suppress(Exception):
                    self._follow(self.name, line.rstrip("\n"))
        self._first.set()

    def wait_first_line(self, timeout: float) -> str:
        self._first.wait(timeout)
        return self.first_line

    def alive(self) -> bool:
        return self.proc.poll() is None

    def tail(self, chars: int = 3000) -> str:
        try:
            return self.log_path.read_text()[-chars:]
        except OSError:
            return ""

    def stop(self, timeout: float = 10.0) -> int:
        """SIGTERM, then SIGKILL after ``timeout``; the exit code."""
        if self.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    self.proc.kill()
                self.proc.wait(5)
        self._reader.join(5)
        self._log.close()
        return int(self.proc.returncode)


class Child(Protocol):
    """What the loop needs of each of its processes."""

    name: str

    def alive(self) -> bool: ...

    def tail(self, chars: int = 3000) -> str: ...

    def stop(self, timeout: float = 10.0) -> int: ...


class Closable(Protocol):
    def close(self) -> None: ...


def stop_all(
    procs: Sequence[Child], kubelets: Iterable[Closable], api: Closable | None, exit_codes: dict[str, int]
) -> None:
    """Stop the loop: every component in reverse start order, then the kubelets (killing every pod
    process, removing every cgroup), then the API server (``procs[0]``: the others report to it until
    they stop) and the client last. A code already recorded (a component that died) is kept."""
    for p in reversed(procs[1:]):
        exit_codes.setdefault(p.name, p.stop())
    for k in kubelets:
        k.close()
    if procs:
        exit_codes.setdefault(procs[0].name, procs[0].stop())
    if api is not None:
        api.close()


def wait_for(what: str, cond: Callable[[], object], timeout: float, procs: Iterable[Child] = ()) -> None:
    """Poll ``cond`` until true; fail naming ``what`` (and the tail of a process that died) on timeout."""
    deadline = time.monotonic() + timeout
    while not cond():
        for p in procs:
            if not p.alive():
                raise RuntimeError(f"{p.name} exited while waiting for {what}:\n{p.tail()}")
        if time.monotonic() > deadline:
            raise TimeoutError(f"{what}: not reached in {timeout:.0f}s")
        time.sleep(0.05)


def python(module: str, *args: str) -> list[str]:
    return [sys.executable, "-m", module, *args]


def api_server(work: Path, logs: Path) -> tuple[Proc, Path]:
    kubeconfig = work / "kubeconfig"
    proc = Proc("apiserver", python("tests.apiserver", "--port=0", f"--kubeconfig={kubeconfig}"), logs)
    line = proc.wait_first_line(30)
    if "listening on" not in line:
        proc.stop()
        raise RuntimeError(f"the test API server did not start: {line or proc.tail()}")
    return proc, kubeconfig


def kubectl_hints(kubeconfig: Path) -> list[str]:
    """What to type in another terminal to watch the loop with kubectl while it runs (the test API server
    answers kubectl's tables; without RBAC, plain HTTP is enough)."""
    return [
        "watch it from another terminal while the loop runs (the kubeconfig goes when it ends):",
        f"  export KUBECONFIG={kubeconfig}",
        "  kubectl get nodes -o wide",
        "  kubectl get pods -A -o wide --watch",
        "  kubectl get nodemetrics,nodeslos",
        "  kubectl get events -A --field-selector reason=Descheduled --watch",
    ]


def write(path: Path, doc: Any) -> Path:
    path.write_text(yaml.safe_dump(doc) if path.suffix in (".yaml", ".yml") else json.dumps(doc))
    return path


class Component:
    """A cluster process serving HTTP (``/readyz``) on its own port."""

    def __init__(
        self, name: str, module: str, args: Sequence[str], logs: Path, *, subcommand: str = "", **kw: Any
    ) -> None:
        self.name = name
        self._port: int | None = None
        head = [subcommand] if subcommand else []
        self.proc = Proc(name, python(module, *head, f"--addr={EPHEMERAL}", *args), logs, **kw)

    @property
    def port(self) -> int:
        """The port the process chose and logged (waits for it): no race with other processes."""
        if self._port is None:
            self._port = port_from_log(self.proc.log_path, self.proc.proc)
        return self._port

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def ready(self) -> bool:
        if self._port is None:
            try:  # one look at the log: ready() is polled
                self._port = port_from_log(self.proc.log_path, self.proc.proc, timeout=0)
            except (TimeoutError, RuntimeError):
                return False
        return http_ok(self.base + "/readyz")


class AgentProc:
    """A koordlet of the kit (:class:`koordlet.testing.agent.Agent`, cluster mode) as one of the loop's
    processes: named, checked alive, stopped, its log tail shown when something goes wrong."""

    def __init__(self, name: str, agent: Agent) -> None:
        self.name = name
        self.agent = agent
        self.proc = agent.proc
        self.base = agent.base

    def ready(self) -> bool:
        return http_ok(self.base + "/readyz")

    def alive(self) -> bool:
        return self.proc.poll() is None

    def tail(self, chars: int = 3000) -> str:
        return self.agent.tail(chars)

    def stop(self, timeout: float = 10.0) -> int:
        return self.agent.stop(timeout)


def agent(
    node: str,
    kubeconfig: Path,
    work: Path,
    *,
    cgroup_parent: str,
    proc_root: Path,
    kubelet_port: int,
    extra: Sequence[str] = (),
) -> AgentProc:
    """One node's koordlet: its own name, kubepods parent, ``/proc`` view, kubelet port and state;
    ``extra`` flags after the loop's own."""
    state = work / node
    state.mkdir(parents=True, exist_ok=True)
    flags = [
        f"--cgroup-root=/{cgroup_parent}",
        f"--proc-root-dir={proc_root}",
        "--kubelet-insecure-tls",
        f"--kubelet-read-only-port={kubelet_port}",
        "--kubelet-sync-interval=1s",
        "--fast-sample-interval=0",
        "--node-metric-report-min-interval=2s",
        # The loop is about the cluster side: QoS plugins off, so the node's load is what its pods burn.
        "--feature-gates=BECPUSuppress=false,CPUBurst=false",
        *extra,
    ]
    return AgentProc(f"koordlet-{node}", Agent(state, *flags, env={"NODE_NAME": node}, kubeconfig=kubeconfig))
