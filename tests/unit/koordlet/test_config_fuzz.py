"""The command line and the ``--config`` YAML, fuzzed: any mix of Go-style and GNU-style flags, known or
not, with any values, and any config file, ends in exit 0 or exit 2 with a message, never a traceback."""

from __future__ import annotations

import logging
import tempfile
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from koordlet import cli, config
from koordlet.config import Configuration
from koordshared.runtime.errors import ConfigError
from tests.support.strategies import json_values, text_mutations

NAMES = [f.name for f in config.AGENT_FLAGS] + ["no-such-flag", "feature-gates", "v", ""]
VALUES = st.sampled_from(
    [
        "",
        "0",
        "-1",
        "1",
        "true",
        "false",
        "yes",
        "500ms",
        "1m30s",
        "-5s",
        "1e9",
        "nan",
        "abc",
        "127.0.0.1:0",
        ":99999",
        "BECPUSuppress=true",
        "Nope=true",
        "BECPUSuppress=maybe",
        "/tmp",
        "../..",
        "text",
        "json",
    ]
) | st.text(max_size=12)


@st.composite
def flag(draw: st.DrawFn) -> list[str]:
    name, value = draw(st.sampled_from(NAMES)), draw(VALUES)
    style = draw(st.sampled_from(["--n=v", "-n=v", "--n v", "-n v", "--n"]))
    if style == "--n":
        return [f"--{name}"]
    if style.endswith(" v"):
        return [style.split(" ")[0].replace("n", name, 1), value]
    return [style.replace("n", name, 1).replace("=v", f"={value}")]


def run(args: list[str]) -> int:
    with pytest.raises(SystemExit) as done:
        cli.main(["run", *args])
    code = done.value.code
    return 0 if code is None else int(code)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(parts=st.lists(flag(), max_size=4))
def test_any_command_line_runs_or_exits_2_with_a_message(
    parts: list[list[str]], captured: list[Configuration], capsys: pytest.CaptureFixture[str]
) -> None:
    args = [a for p in parts for a in p if "\x00" not in a]
    captured.clear()
    code = run(args)
    err = capsys.readouterr().err
    assert code in (0, 2), (args, code, err)
    assert "Traceback" not in err, err
    if code == 2:
        assert "Error" in err and not captured, (args, err)
    else:
        assert len(captured) == 1


VALID = "collect-res-used-interval: 2s\nfeature-gates: {BECPUSuppress: true}\nreconcile-interval-seconds: 3\n"


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    text=text_mutations(VALID)
    | st.builds(yaml.safe_dump, json_values)
    | st.builds(lambda v: yaml.safe_dump({"collect-res-used-interval": v}), json_values)
    | st.text(max_size=120)
)
def test_any_config_file_is_taken_or_refused_with_a_message(
    text: str, captured: list[Configuration], capsys: pytest.CaptureFixture[str]
) -> None:
    known = {f.name for f in config.AGENT_FLAGS}
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "koordlet.yaml"
        path.write_text(text)
        try:
            loaded: Any = config.load_config_file(str(path), known)
        except ConfigError as err:
            assert str(err).startswith("--config")
        else:
            assert isinstance(loaded, dict) and set(loaded) <= known
        captured.clear()
        code = run([f"--config={path}"])
    stderr = capsys.readouterr().err
    assert code in (0, 2) and "Traceback" not in stderr, (text, stderr)
    assert (code == 0) == (len(captured) == 1)


@pytest.fixture(autouse=True)
def _quiet_logging() -> Any:
    yield
    logging.getLogger().handlers = [
        h for h in logging.getLogger().handlers if not getattr(h, "_koordlet", False)
    ]
