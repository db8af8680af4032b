"""Run the test API server outside pytest until SIGTERM or SIGINT::

    python -m tests.apiserver --port 6443 --kubeconfig /tmp/kubeconfig [--authorization] [--tls]
        [--apply FILE]...

It serves the repository's NodeMetric and NodeSLO CRDs (plus any ``--crd``), applies ``--apply``
manifests, writes a kubeconfig for its admin user when asked (for kubectl and the components under
demonstration), prints one line with its URL once it listens, and stops cleanly on a signal.
"""

from __future__ import annotations

import argparse
import signal
import sys
import threading
from pathlib import Path
from types import FrameType

import yaml

from tests.apiserver.manifests import DEFAULT_CRDS
from tests.apiserver.server import APIServer


def kubeconfig(server: APIServer) -> dict[str, object]:
    """A kubeconfig naming this server and its admin token (see :meth:`APIServer.kubeconfig`)."""
    return server.kubeconfig()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.apiserver", description=__doc__.splitlines()[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0, help="0 picks a free port")
    parser.add_argument("--crd", action="append", default=[], type=Path, help="another CRD file to serve")
    parser.add_argument("--apply", action="append", default=[], type=Path, help="a manifest to load")
    parser.add_argument("--authorization", action="store_true", help="enforce RBAC on bearer tokens")
    parser.add_argument(
        "--tls", action="store_true", help="serve HTTPS with a generated CA (kubectl sends tokens)"
    )
    parser.add_argument("--kubelet-auto-confirm", action="store_true", help="finish pod deletions at once")
    parser.add_argument("--kubeconfig", type=Path, help="write a kubeconfig for the admin user here")
    args = parser.parse_args(argv)
    for path in [*args.crd, *args.apply]:
        if not path.is_file():
            parser.error(f"no such file: {path}")
    stop = threading.Event()

    def on_signal(signum: int, frame: FrameType | None) -> None:
        stop.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    server = APIServer(
        crds=[*DEFAULT_CRDS, *args.crd],
        host=args.host,
        port=args.port,
        authorization=args.authorization,
        kubelet_auto_confirm=args.kubelet_auto_confirm,
        tls=args.tls,
    )
    applied = server.apply(*args.apply)
    server.start()
    try:
        if args.kubeconfig is not None:
            args.kubeconfig.write_text(yaml.safe_dump(server.kubeconfig()))
        print(f"test API server listening on {server.url} ({len(applied)} objects applied)", flush=True)
        stop.wait()
    finally:
        server.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
