"""HTTP front of the test API server: URL routing, verbs, eviction and chunked watch streams.

Paths follow the real API: ``/api/v1/...`` and ``/apis/<group>/<version>/...``, namespaced as
``namespaces/<ns>/<plural>[/<name>[/<subresource>]]`` or cluster-scoped as ``<plural>[/<name>[/...]]``,
plus the deprecated ``.../watch/...`` prefix. Bodies are JSON; a POST without Content-Type is JSON (the
official client sends none). A watch is HTTP/1.1 chunked newline-delimited JSON events that ends with the
zero-length chunk when ``timeoutSeconds`` passes, so ``Watch.stream(timeout_seconds=...)`` returns.
"""

from __future__ import annotations

import json
import logging
import time
from http.server import BaseHTTPRequestHandler
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qs, urlsplit

from tests.apiserver import binding, status
from tests.apiserver.resources import ResourceType
from tests.apiserver.status import APIError
from tests.apiserver.watch import WatchClosed

if TYPE_CHECKING:
    from tests.apiserver.server import APIServer, _HTTPServer

log = logging.getLogger(__name__)
Reply = tuple[int, Any]

VERSION_INFO = {
    "major": "1",
    "minor": "33",
    "gitVersion": "v1.33.0-koordlet-test",
    "gitCommit": "0000000000000000000000000000000000000000",
    "gitTreeState": "clean",
    "buildDate": "2026-01-01T00:00:00Z",
    "goVersion": "go1.24",
    "compiler": "gc",
    "platform": "linux/amd64",
}


def _truthy(value: str | None) -> bool:
    return value in ("true", "1", "True")


class Handler(BaseHTTPRequestHandler):
    """One connection; kube clients keep connections alive, hence HTTP/1.1."""

    protocol_version = "HTTP/1.1"
    server: _HTTPServer

    def log_message(self, format: str, *args: Any) -> None:
        log.debug("%s " + format, self.address_string(), *args)

    def do_GET(self) -> None:
        self._dispatch("GET")

    def do_POST(self) -> None:
        self._dispatch("POST")

    def do_PUT(self) -> None:
        self._dispatch("PUT")

    def do_PATCH(self) -> None:
        self._dispatch("PATCH")

    def do_DELETE(self) -> None:
        self._dispatch("DELETE")

    # ---- plumbing -------------------------------------------------------------------------------------

    @property
    def api(self) -> APIServer:
        return self.server.api

    def _send(self, code: int, body: Any, headers: dict[str, str] | None = None) -> None:
        data = json.dumps(body).encode() if not isinstance(body, bytes) else body
        self.send_response(code)
        self.send_header("Content-Type", "application/json" if not isinstance(body, bytes) else "text/plain")
        self.send_header("Content-Length", str(len(data)))
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(data)

    def _read_body(self) -> bytes:
        length = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(length) if length > 0 else b""

    def _dispatch(self, method: str) -> None:
        url = urlsplit(self.path)
        query = {k: v[-1] for k, v in parse_qs(url.query, keep_blank_values=True).items()}
        raw = self._read_body()
        code = 500
        try:
            body = json.loads(raw) if raw else None
        except json.JSONDecodeError:
            body = raw
        recorded = False

        def record(answered: int) -> None:
            nonlocal recorded
            if not recorded:
                recorded = True
                self.api.record(method, url.path, query, dict(self.headers.items()), body, answered)

        self._record = record
        try:
            self.api.check_injected(method, url.path)
            if isinstance(body, bytes):
                raise status.bad_request("the request body is not valid JSON")
            reply = self._route(method, url.path, query, body)
            if reply is None:  # a watch stream, already answered
                code = 200
                return
            code, payload = reply
            self._send(code, payload)
        except APIError as err:
            code = err.code
            self._send(err.code, err.body(), err.headers)
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True
        except Exception as err:  # a bug in the test server: answer 500 and keep serving
            log.exception("test API server failed on %s %s", method, self.path)
            self._send(500, status.internal(repr(err)).body())
        finally:
            record(code)

    # ---- routing --------------------------------------------------------------------------------------

    def _route(self, method: str, path: str, query: dict[str, str], body: Any) -> Reply | None:
        registry = self.api.registry
        parts = [p for p in path.split("/") if p]
        if parts in (["healthz"], ["livez"], ["readyz"]):
            return 200, b"ok"
        if parts == ["version"]:
            return 200, VERSION_INFO
        if parts == ["api"]:
            return 200, registry.api_versions()
        if parts == ["apis"]:
            return 200, registry.api_group_list()
        if len(parts) >= 2 and parts[0] == "api":
            group, version, rest = "", parts[1], parts[2:]
        elif len(parts) >= 3 and parts[0] == "apis":
            group, version, rest = parts[1], parts[2], parts[3:]
        elif len(parts) == 2 and parts[0] == "apis":
            found = registry.api_group(parts[1])
            if found is None:
                raise _no_route()
            return 200, found
        else:
            raise _no_route()
        if not rest:
            found = registry.resource_list(group, version)
            if found is None or method != "GET":
                raise _no_route()
            return 200, found
        watch = _truthy(query.get("watch"))
        if rest[0] == "watch":
            watch, rest = True, rest[1:]
        ns: str | None = None
        if len(rest) >= 3 and rest[0] == "namespaces":
            candidate = registry.lookup(group, version, rest[2])
            if candidate is not None and candidate.namespaced:
                ns, rest = rest[1], rest[2:]
        if not rest or len(rest) > 3:
            raise _no_route()
        rt = registry.lookup(group, version, rest[0])
        if rt is None or (ns is not None and not rt.namespaced):
            raise _no_route()
        name = rest[1] if len(rest) > 1 else None
        sub = rest[2] if len(rest) > 2 else None
        if name is None:
            return self._collection(method, rt, ns, query, body, watch)
        if rt.namespaced and ns is None:
            raise _no_route()
        return self._item(method, rt, ns, name, sub, query, body)

    def _collection(
        self, method: str, rt: ResourceType, ns: str | None, query: dict[str, str], body: Any, watch: bool
    ) -> Reply | None:
        store = self.api.store
        if rt.key == ("", "bindings"):
            if method != "POST" or ns is None:
                raise APIError(405, f"{method} is not supported on bindings")
            return 201, binding.bind(store, ns, None, body)
        if method == "GET" and watch:
            self._watch(rt, ns, query)
            return None
        if method == "GET":
            items, rv = store.list(
                rt, ns, field_selector=query.get("fieldSelector"), label_selector=query.get("labelSelector")
            )
            return 200, {
                "kind": rt.list_kind,
                "apiVersion": rt.api_version,
                "metadata": {"resourceVersion": str(rv)},
                "items": items,
            }
        if method == "POST":
            if rt.namespaced and ns is None:
                raise _no_route()
            if not isinstance(body, dict):
                raise status.bad_request("the body of a create must be an object")
            strict = query.get("fieldValidation") == "Strict"
            return 201, store.create(rt, body, ns, keep_status=False, strict=strict)
        if method == "DELETE":
            items, rv = store.list(
                rt, ns, field_selector=query.get("fieldSelector"), label_selector=query.get("labelSelector")
            )
            deleted = []
            for item in items:
                meta = item["metadata"]
                try:
                    deleted.append(store.delete(rt, meta["name"], meta.get("namespace")))
                except APIError as err:
                    if err.code != 404:  # deleted meanwhile: fine
                        raise
            return 200, {"kind": rt.list_kind, "apiVersion": rt.api_version, "metadata": {}, "items": deleted}
        raise APIError(405, f"{method} is not supported on a collection")

    def _item(
        self,
        method: str,
        rt: ResourceType,
        ns: str | None,
        name: str,
        sub: str | None,
        query: dict[str, str],
        body: Any,
    ) -> Reply:
        store = self.api.store
        if sub == "eviction" and rt.key == ("", "pods"):
            if method != "POST":
                raise APIError(405, "only POST is allowed on pods/eviction")
            return self._evict(ns or "", name, body)
        if sub == "binding" and rt.key == ("", "pods"):
            if method != "POST":
                raise APIError(405, "only POST is allowed on pods/binding")
            return 201, binding.bind(store, ns or "", name, body)
        if sub not in (None, "status") or (sub == "status" and not rt.status_subresource):
            raise _no_route()
        if method == "GET":
            return 200, store.get(rt, name, ns)
        if method == "PUT":
            if not isinstance(body, dict):
                raise status.bad_request("the body of an update must be an object")
            body_name = (body.get("metadata") or {}).get("name")
            if body_name != name:
                raise status.bad_request(
                    f"the name of the object ({body_name}) does not match the name on the URL ({name})"
                )
            strict = query.get("fieldValidation") == "Strict"
            # Custom resources refuse unconditional updates; core pods/nodes accept them.
            require = rt.crd is not None
            return 200, store.update(
                rt, body, ns, subresource=sub, require_resource_version=require, strict=strict
            )
        if method == "PATCH":
            ctype = self.headers.get("Content-Type") or "application/merge-patch+json"
            return 200, store.patch(rt, name, body, ctype, ns, subresource=sub)
        if method == "DELETE" and sub is None:
            opts = body if isinstance(body, dict) else {}
            pre = opts.get("preconditions") or {}
            return 200, store.delete(
                rt, name, ns, uid=pre.get("uid"), resource_version=pre.get("resourceVersion")
            )
        raise APIError(405, f"{method} is not supported here")

    def _evict(self, ns: str, name: str, body: Any) -> Reply:
        if not isinstance(body, dict):
            raise status.bad_request("an Eviction body is required")
        body_name = (body.get("metadata") or {}).get("name")
        if body_name not in (None, name):
            raise status.bad_request("name in URL does not match name in Eviction object")
        self.api.store.get("pods", name, ns)
        if self.api.evictions_blocked:
            raise APIError(
                429,
                "Cannot evict pod as it would violate the pod's disruption budget.",
                details={
                    "causes": [
                        {
                            "reason": "DisruptionBudget",
                            "message": "The disruption budget test-pdb needs 1 healthy pods "
                            "and has 1 currently",
                        }
                    ]
                },
            )
        pre = (body.get("deleteOptions") or {}).get("preconditions") or {}
        self.api.store.delete(
            "pods", name, ns, uid=pre.get("uid"), resource_version=pre.get("resourceVersion")
        )
        return 201, status.status_body(201, "", "", success=True)

    # ---- watch ----------------------------------------------------------------------------------------

    def _chunk(self, event: dict[str, Any]) -> None:
        line = json.dumps(event).encode() + b"\n"
        self.wfile.write(b"%x\r\n%s\r\n" % (len(line), line))
        self.wfile.flush()

    def _start_stream(self) -> None:
        self._record(200)  # logged when the stream starts, so tests see a watch while it is open
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()

    def _watch(self, rt: ResourceType, ns: str | None, query: dict[str, str]) -> None:
        store = self.api.store
        timeout = float(query.get("timeoutSeconds") or self.api.default_watch_timeout)
        bookmarks = _truthy(query.get("allowWatchBookmarks"))
        try:
            watcher, initial = store.watch(
                rt,
                ns,
                resource_version=query.get("resourceVersion"),
                field_selector=query.get("fieldSelector"),
                label_selector=query.get("labelSelector"),
            )
        except APIError as err:
            if err.code != 410:
                raise
            # The watch cache reports an expired version inside a 200 stream, as an ERROR event.
            self._start_stream()
            self._chunk({"type": "ERROR", "object": err.body()})
            self.wfile.write(b"0\r\n\r\n")
            return
        self.api.stream_started()
        try:
            self._start_stream()
            for typ, obj in initial:
                self._chunk({"type": typ, "object": obj})
            now = time.monotonic()
            deadline, interval = now + timeout, self.api.bookmark_interval
            next_bookmark = now + interval
            while (left := deadline - time.monotonic()) > 0:
                wait = min(left, max(next_bookmark - time.monotonic(), 0.0)) if bookmarks else left
                try:
                    event = watcher.next(wait)
                except WatchClosed:
                    break
                if event is not None:
                    self._chunk({"type": event[0], "object": event[1]})
                elif bookmarks and time.monotonic() >= next_bookmark:
                    meta = {"resourceVersion": str(watcher.last_rv)}
                    self._chunk(
                        {
                            "type": "BOOKMARK",
                            "object": {"kind": rt.kind, "apiVersion": rt.api_version, "metadata": meta},
                        }
                    )
                    next_bookmark = time.monotonic() + interval
            self.wfile.write(b"0\r\n\r\n")
            self.wfile.flush()
        except OSError:
            self.close_connection = True  # the client went away (Watch.stop() shuts its socket)
        finally:
            watcher.close()
            self.api.stream_ended()


def _no_route() -> APIError:
    return APIError(404, "the server could not find the requested resource")
