"""Fixtures for executor tests: a recording writer around the real one, and an executor on a FakeHost."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pytest
from prometheus_client import CollectorRegistry

from koordlet.resourceexecutor.config import ExecutorConfig
from koordlet.resourceexecutor.executor import ResourceExecutor
from koordlet.system import native
from koordlet.testing import FakeClock


class RecordingWriter:
    """Calls the real batch writer (or returns ``fail[path-suffix]`` errnos) and records every write."""

    def __init__(self) -> None:
        self.writes: list[tuple[str, str]] = []
        self.fail: dict[str, int] = {}
        self.before_write: Callable[[str, str], int] | None = None

    def __call__(self, items: Sequence[tuple[str | Path, str | bytes]]) -> list[int]:
        out: list[int] = []
        for path, value in items:
            p, v = str(path), value.decode() if isinstance(value, bytes) else value
            err = next((e for suffix, e in self.fail.items() if p.endswith(suffix)), 0)
            if err == 0 and self.before_write is not None:
                err = self.before_write(p, v)
            if err == 0:
                err = native.write_batch([(p, v)])[0]
            if err == 0:
                self.writes.append((p, v))
            out.append(err)
        return out


@pytest.fixture
def writer() -> RecordingWriter:
    return RecordingWriter()


@pytest.fixture
def registry() -> CollectorRegistry:
    return CollectorRegistry()


@pytest.fixture
def make_executor(
    fake_host: Any, fake_clock: FakeClock, writer: RecordingWriter, registry: CollectorRegistry
) -> Callable[..., ResourceExecutor]:
    fake_host.set_online_cpus(range(4))

    def make(**config: Any) -> ResourceExecutor:
        return ResourceExecutor(
            fake_host.paths,
            config=ExecutorConfig(**config),
            clock=fake_clock,
            wall_clock=fake_clock.wall,
            registry=registry,
            writer=writer,
        )

    return make
