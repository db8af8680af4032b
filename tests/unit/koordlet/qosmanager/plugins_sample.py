"""Sample plugins for the plugin-host tests (good, raising, invalid)."""

from __future__ import annotations

import threading
from typing import ClassVar

from koordlet import api

EVENTS: list[str] = []
GOOD_INTERVAL = api.Flag("good-interval-seconds", float, 0.01, "tick interval")


class Good(api.QOSPluginBase):
    name = "Good"
    feature = api.FeatureSpec(default=True, stage=api.Stage.BETA)

    def init_flags(self, flags: api.FlagSet) -> None:
        flags.add(GOOD_INTERVAL)

    def setup(self, ctx: api.PluginContext) -> None:
        super().setup(ctx)
        EVENTS.append("setup Good")
        self.ticks = 0

    def run(self, stop: threading.Event) -> None:
        EVENTS.append("run Good")
        self.ctx.every(self.ctx.option(GOOD_INTERVAL), self.reconcile)

    def reconcile(self) -> None:
        self.ticks += 1

    def shutdown(self) -> None:
        EVENTS.append("shutdown Good")


class Second(Good):
    name = "Second"

    def init_flags(self, flags: api.FlagSet) -> None:
        return None

    def setup(self, ctx: api.PluginContext) -> None:
        api.QOSPluginBase.setup(self, ctx)
        self.ticks = 0
        EVENTS.append("setup Second")

    def run(self, stop: threading.Event) -> None:
        EVENTS.append("run Second")
        self.ctx.every(0.01, self.reconcile)

    def shutdown(self) -> None:
        EVENTS.append("shutdown Second")


class Disabled(api.QOSPluginBase):
    name = "Disabled"
    feature = api.FeatureSpec(default=False, stage=api.Stage.ALPHA)

    def setup(self, ctx: api.PluginContext) -> None:
        EVENTS.append("setup Disabled")
        raise AssertionError("a disabled plugin must never be set up")


class RaisingTick(api.QOSPluginBase):
    name = "RaisingTick"
    feature = api.FeatureSpec(default=True, stage=api.Stage.ALPHA)

    def run(self, stop: threading.Event) -> None:
        self.ctx.every(0.01, self.reconcile)

    def reconcile(self) -> None:
        raise RuntimeError("boom")


class RaisingRun(api.QOSPluginBase):
    name = "RaisingRun"
    feature = api.FeatureSpec(default=True, stage=api.Stage.ALPHA)

    def run(self, stop: threading.Event) -> None:
        raise RuntimeError("run failed")


class NoShutdown:
    name: ClassVar[str] = "NoShutdown"
    feature: ClassVar[api.FeatureSpec] = api.FeatureSpec(default=True)

    def init_flags(self, flags: api.FlagSet) -> None: ...

    def setup(self, ctx: api.PluginContext) -> None: ...

    def run(self, stop: threading.Event) -> None: ...
