"""Logging: klog-like verbosity and the JSON line format."""

from __future__ import annotations

import io
import json
import logging
from collections.abc import Iterator

import pytest

from koordshared.runtime import logs


@pytest.fixture
def restore_root() -> Iterator[None]:
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    yield
    for h in list(root.handlers):
        if h not in handlers:
            root.removeHandler(h)
    root.setLevel(level)


def test_json_lines_carry_level_logger_message_and_exception(restore_root: None) -> None:
    out = io.StringIO()
    logs.setup(0, "json", stream=out)
    log = logging.getLogger("koordlet.test")
    log.debug("hidden at -v 0")
    log.info("pods %d", 3)
    try:
        raise ValueError("bad")
    except ValueError:
        log.exception("failed")
    lines = [json.loads(line) for line in out.getvalue().splitlines()]
    assert [(x["level"], x["msg"]) for x in lines] == [("info", "pods 3"), ("error", "failed")]
    assert lines[0]["logger"] == "koordlet.test" and lines[0]["ts"].endswith("Z")
    assert "ValueError: bad" in lines[1]["exc"]


def test_verbosity_four_enables_debug_and_setup_is_idempotent(restore_root: None) -> None:
    out = io.StringIO()
    logs.setup(4, "text", stream=out)
    logs.setup(4, "text", stream=out)
    logging.getLogger("koordlet.test").debug("detail")
    assert out.getvalue().count("detail") == 1
    assert "koordlet.test] detail" in out.getvalue()


def test_once_per_change_warns_on_news_only(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG, "test.once")
    once = logs.OncePerChange(logging.getLogger("test.once"), subjects=2)
    for _ in range(3):
        once.warning("pod a", "pod a: bad UID")
    once.warning("pod a", "pod a: bad container ID")  # changed: news again
    once.warning("pod b", "pod b: bad UID")
    once.warning("pod c", "pod c: bad UID")  # pushes "pod a" out of the bounded memory
    once.warning("pod a", "pod a: bad container ID")
    once.forget("pod c")
    once.warning("pod c", "pod c: bad UID")
    warned = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert warned == [
        "pod a: bad UID",
        "pod a: bad container ID",
        "pod b: bad UID",
        "pod c: bad UID",
        "pod a: bad container ID",
        "pod c: bad UID",
    ]
    assert len([r for r in caplog.records if r.levelno == logging.DEBUG]) == 2
