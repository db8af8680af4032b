"""koord-manager's configuration, from its flags (names as koord-manager's where it has one)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from koordshared.kube.leaderelection import ElectionConfig, default_identity
from koordshared.kube.process import Address, parse_addr, parse_seconds
from koordshared.runtime.errors import ConfigError

CONTROLLERS = ("nodemetric", "nodeslo", "noderesource")


def enabled_controllers(spec: Sequence[str]) -> tuple[str, ...]:
    """koord-manager's ``--controllers``: names, ``*`` for all, ``-name`` to exclude."""
    items = [s.strip() for s in spec if s.strip()]
    unknown = [s for s in items if s.lstrip("-") not in (*CONTROLLERS, "*")]
    if unknown:
        raise ConfigError(f"--controllers: unknown {', '.join(unknown)}; known: {', '.join(CONTROLLERS)}")
    out = []
    for name in CONTROLLERS:
        if name in items or (f"-{name}" not in items and "*" in items):
            out.append(name)
    return tuple(out)


@dataclass(frozen=True, slots=True)
class ManagerConfig:
    addr: Address
    kubeconfig: str = ""
    client_configuration: Any = None
    """A ``kubernetes.client.Configuration`` (tests); wins over ``kubeconfig``."""
    controllers: tuple[str, ...] = CONTROLLERS
    config_namespace: str = "koordinator-system"
    slo_config_name: str = "slo-controller-config"
    leader_election: bool = True
    election: ElectionConfig = field(default_factory=ElectionConfig)
    workers: int = 2
    request_timeout: float = 3.0
    watch_timeout: float = 300.0
    sync_period: float = 0.0
    """Re-reconcile every node this often (0: only on events; koord-manager's ``--sync-period``)."""
    sync_timeout: float = 60.0

    def validate(self) -> None:
        if self.workers < 1:
            raise ConfigError(f"--workers={self.workers}: want at least 1")
        if self.request_timeout <= 0:
            raise ConfigError("--request-timeout must be positive")
        if self.leader_election:
            self.election.validate()
            if self.request_timeout >= self.election.margin:
                # A write sent just before the leadership deadline must land before anyone else can lead.
                raise ConfigError(
                    f"--request-timeout={self.request_timeout}s must be below --leader-elect-lease-duration "
                    f"minus --leader-elect-renew-deadline ({self.election.margin}s)"
                )


def build(options: Mapping[str, Any], client_configuration: Any = None) -> ManagerConfig:
    """From the CLI's option values (flag names with dashes)."""
    o = options

    def seconds(name: str) -> float:
        return parse_seconds(o[name], f"--{name}")

    election = ElectionConfig(
        namespace=str(o["leader-election-namespace"]),
        name=str(o["leader-election-id"]),
        identity=str(o["leader-election-identity"]) or default_identity(),
        lease_duration=seconds("leader-elect-lease-duration"),
        renew_deadline=seconds("leader-elect-renew-deadline"),
        retry_period=seconds("leader-elect-retry-period"),
    )
    cfg = ManagerConfig(
        addr=parse_addr(str(o["addr"])),
        kubeconfig=str(o["kubeconfig"]),
        client_configuration=client_configuration,
        controllers=enabled_controllers(str(o["controllers"]).split(",")),
        config_namespace=str(o["config-namespace"]),
        slo_config_name=str(o["slo-config-name"]),
        leader_election=bool(o["enable-leader-election"]),
        election=election,
        workers=int(o["workers"]),
        request_timeout=seconds("request-timeout"),
        sync_period=seconds("sync-period"),
    )
    cfg.validate()
    return cfg
