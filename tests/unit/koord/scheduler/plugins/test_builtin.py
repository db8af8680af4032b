"""The built-in plugins' table: each name loads the plugin that calls itself so, and a process imports
only the plugins its profiles build."""

from __future__ import annotations

import subprocess
import sys

from koord.scheduler.plugins import BUILTIN


def test_each_builtin_name_loads_the_plugin_of_that_name() -> None:
    for name, builtin in BUILTIN.items():
        factory = builtin.load()
        module = sys.modules[builtin.module]
        declared = getattr(module, "NAME", None) or getattr(factory, "name", None) or name
        assert callable(factory)
        assert declared == name or name in (
            "NodeResourcesFit",
            "NodeResourcesBalancedAllocation",  # one module, two plugins
        ), (name, declared)


def test_the_default_profile_imports_no_koordinator_plugin() -> None:
    code = (
        "import sys\n"
        "from koord.scheduler.app import check\n"
        "from koord.scheduler.config import parse_configuration\n"
        "from koord.scheduler.plugins import plugin_registry\n"
        "check(parse_configuration({}), plugin_registry(lambda: []))\n"
        "print(sorted(m for m in sys.modules if m.startswith('koord.scheduler.plugins.')))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    for koordinator in ("loadaware", "deviceshare", "nodenumaresource", "reservation", "elasticquota"):
        assert f"koord.scheduler.plugins.{koordinator}" not in out, out
    assert "koord.scheduler.plugins.noderesources" in out
