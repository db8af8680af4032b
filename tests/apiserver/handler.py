"""HTTP front of the test API server: URL routing, verbs, eviction and chunked watch streams.

Paths follow the real API: ``/api/v1/...`` and ``/apis/<group>/<version>/...``, namespaced as
``namespaces/<ns>/<plural>[/<name>[/<subresource>]]`` or cluster-scoped as ``<plural>[/<name>[/...]]``,
plus the deprecated ``.../watch/...`` prefix. Bodies are read and decoded by :mod:`tests.apiserver.bodies`
(JSON, YAML, protobuf); warnings a request collects go out as ``Warning`` headers; whatever a request
holds, the handler answers a Status (an unexpected exception is a 500, noted on the server). A watch is
HTTP/1.1 chunked newline-delimited JSON events that ends with the zero-length chunk when
``timeoutSeconds`` passes, so ``Watch.stream(timeout_seconds=...)`` returns.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import time
from http.server import BaseHTTPRequestHandler
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qs, urlsplit

from tests.apiserver import bodies, endpoints, openapiproto, requestinfo, requestwarnings, status, tables
from tests.apiserver.resources import ResourceType
from tests.apiserver.status import APIError
from tests.apiserver.watch import WatchClosed

if TYPE_CHECKING:
    from tests.apiserver.connections import ConnectionServer
    from tests.apiserver.server import APIServer

log = logging.getLogger(__name__)
Reply = tuple[int, Any]
BOOKMARK_BEFORE_TIMEOUT = 2.0

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


@dataclasses.dataclass(frozen=True, slots=True)
class RawReply:
    """An answer that is not JSON: its bytes and media type."""

    data: bytes
    content_type: str


class Handler(BaseHTTPRequestHandler):
    """One connection; kube clients keep connections alive, hence HTTP/1.1."""

    protocol_version = "HTTP/1.1"
    # Headers and body go out in two sends; with Nagle's algorithm the body would wait for the client's
    # delayed ACK (~40 ms per request on Linux), hiding every client's own latency.
    disable_nagle_algorithm = True
    server: ConnectionServer

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

    def _send(self, code: int, body: Any, headers: list[tuple[str, str]] | None = None) -> None:
        if isinstance(body, RawReply):
            data, ctype = body.data, body.content_type
        elif isinstance(body, bytes):
            data, ctype = body, "text/plain"
        else:
            data, ctype = json.dumps(body).encode(), "application/json"
        self.send_response(code)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(data)))
        for name, value in headers or ():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(data)

    def _dispatch(self, method: str) -> None:
        self._raw = b""
        self._decoded: Any = _UNDECODED
        code = 500
        recorded = False
        path = self.path
        query: dict[str, str] = {}

        def record(answered: int) -> None:
            nonlocal recorded
            if not recorded:
                recorded = True
                body = self._decoded if self._decoded is not _UNDECODED else _best_effort(self._raw)
                self.api.record(method, path, query, dict(self.headers.items()), body, answered)

        self._record = record
        with requestwarnings.collecting() as warned:
            try:
                url = urlsplit(self.path)
                path = url.path
                query = {k: v[-1] for k, v in parse_qs(url.query, keep_blank_values=True).items()}
                self._raw = bodies.read(self.rfile, self.headers)
                self.api.check_injected(method, path)
                reply = self._route(method, path, query)
                if reply is None:  # a watch stream, already answered
                    code = 200
                    return
                code, payload = reply
                record(code)  # before answering: a client that reads the log after its call sees the entry
                self._send(code, payload, _warning_headers(warned))
            except APIError as err:
                code = err.code
                record(code)
                headers = list(err.headers.items()) + _warning_headers(warned)
                if isinstance(err, bodies.FramingError):
                    self.close_connection = True  # the rest of the bytes cannot be trusted
                    headers.append(("Connection", "close"))
                self._send(err.code, err.body(), headers)
            except (BrokenPipeError, ConnectionResetError):
                self.close_connection = True
            except Exception as err:  # a bug in the test server: answer 500 and keep serving
                log.exception("test API server failed on %s %s", method, self.path)
                self.api.note_internal_error(method, self.path, err)
                code = 500
                record(code)
                self._send(500, status.internal(repr(err)).body())
            finally:
                record(code)

    # ---- routing --------------------------------------------------------------------------------------

    def _route(self, method: str, path: str, query: dict[str, str]) -> Reply | None:
        info = requestinfo.parse(method, path, query)
        user = self.api.authenticate(self.headers.get("Authorization"))
        self.api.authorize(user, requestinfo.for_authorization(info, query))
        if not info.is_resource:
            return self._non_resource(method, path)
        rt = self.api.registry.lookup(info.group, info.version, info.resource)
        if rt is None or info.extra_parts:
            raise _no_route()
        ns: str | None = info.namespace or None
        if rt.key == ("", "namespaces"):
            ns = None
        elif ns is not None and not rt.namespaced:
            raise _no_route()
        as_table = tables.negotiate(self.headers.get("Accept"))
        include = tables.include_object(query) if as_table else ""
        if info.verb == "watch":
            if info.name:  # the deprecated watch of one object is a watch by metadata.name
                terms = (query.get("fieldSelector"), f"metadata.name={info.name}")
                query = {**query, "fieldSelector": ",".join(t for t in terms if t)}
            self._watch(rt, ns, query, (as_table, include) if as_table else None)
            return None
        ctype = self.headers.get("Content-Type")
        writes = info.verb in ("create", "update", "patch")
        directive = endpoints.field_validation(query) if writes else "Ignore"
        self._decoded = bodies.decode(self._raw, ctype, rt=rt, verb=info.verb, directive=directive)
        ctype = ctype or "application/merge-patch+json"
        body = self._decoded
        call = endpoints.Call(info.verb, rt, ns, info.name, info.subresource, query, body, ctype, user)
        code, payload = endpoints.serve(self.api, call)
        if as_table and info.verb in ("get", "list") and not info.subresource and code == 200:
            payload = tables.table(rt, payload, as_table, include, self.api.store.clock())
        return code, payload

    def _non_resource(self, method: str, path: str) -> Reply:
        registry = self.api.registry
        parts = [p for p in path.split("/") if p]
        if method != "GET":
            raise _no_route()
        if parts in (["healthz"], ["livez"], ["readyz"]):
            return 200, b"ok"
        if parts == ["version"]:
            return 200, VERSION_INFO
        if parts == ["api"]:
            return 200, registry.api_versions()
        if parts[:1] == ["openapi"]:
            return self._openapi(parts[1:])
        if parts == ["apis"]:
            return 200, registry.api_group_list()
        found: Any = None
        if len(parts) == 2 and parts[0] == "apis":
            found = registry.api_group(parts[1])
        elif len(parts) == 2 and parts[0] == "api":
            found = registry.resource_list("", parts[1])
        elif len(parts) == 3 and parts[0] == "apis":
            found = registry.resource_list(parts[1], parts[2])
        if found is None:
            raise _no_route()
        return 200, found

    def _openapi(self, parts: list[str]) -> Reply:
        docs = self.api.openapi
        if parts == ["v2"]:
            if openapiproto.wants_protobuf(self.headers.get("Accept")):
                return 200, RawReply(openapiproto.encode(docs.v2()), openapiproto.MEDIA_TYPE)
            return 200, docs.v2()
        if parts == ["v3"]:
            return 200, docs.v3_index()
        if len(parts) >= 3 and parts[0] == "v3":
            rest = parts[1:]
            found = None
            if rest[0] == "api" and len(rest) == 2:
                found = docs.v3("", rest[1])
            elif rest[0] == "apis" and len(rest) == 3:
                found = docs.v3(rest[1], rest[2])
            if found is not None:
                return 200, found
        raise _no_route()

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

    def _next_bookmark(self, deadline: float) -> float | None:
        """The cacher's ``nextBookmarkTime``: every ``bookmark_interval``, and 2 s before the watch's
        timeout so a client resumes from a fresh version; none once that moment has passed."""
        now = time.monotonic()
        at = min(now + self.api.bookmark_interval, deadline - BOOKMARK_BEFORE_TIMEOUT)
        return at if at > now else None

    def _watch(
        self, rt: ResourceType, ns: str | None, query: dict[str, str], as_table: tuple[str, str] | None
    ) -> None:
        store = self.api.store
        headers = True

        def shown(obj: Any) -> Any:
            nonlocal headers
            if as_table is None:
                return obj
            out = tables.table(rt, obj, as_table[0], as_table[1], store.clock(), headers=headers)
            headers = False  # NoHeaders after the first event
            return out

        timeout = float(query.get("timeoutSeconds") or self.api.default_watch_timeout)
        bookmarks = query.get("allowWatchBookmarks") in ("true", "1", "True")
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
                self._chunk({"type": typ, "object": shown(obj)})
            deadline = time.monotonic() + timeout
            next_bookmark = self._next_bookmark(deadline) if bookmarks else None
            while (left := deadline - time.monotonic()) > 0:
                wait = (
                    left if next_bookmark is None else min(left, max(next_bookmark - time.monotonic(), 0.0))
                )
                try:
                    event = watcher.next(wait)
                except WatchClosed:
                    break
                if event is not None:
                    self._chunk({"type": event[0], "object": shown(event[1])})
                elif next_bookmark is not None and time.monotonic() >= next_bookmark:
                    meta = {"resourceVersion": str(watcher.last_rv)}
                    self._chunk(
                        {
                            "type": "BOOKMARK",
                            "object": {"kind": rt.kind, "apiVersion": rt.api_version, "metadata": meta},
                        }
                    )
                    next_bookmark = self._next_bookmark(deadline)
            self.wfile.write(b"0\r\n\r\n")
            self.wfile.flush()
        except OSError:
            self.close_connection = True  # the client went away (Watch.stop() shuts its socket)
        finally:
            watcher.close()
            self.api.stream_ended()


_UNDECODED = object()


def _best_effort(raw: bytes) -> Any:
    """A body for the request log when the request failed before it was decoded."""
    if not raw:
        return None
    try:
        return json.loads(raw)
    except (ValueError, RecursionError):
        return raw


def _warning_headers(warned: list[str]) -> list[tuple[str, str]]:
    return [("Warning", requestwarnings.header_value(w)) for w in warned]


def _no_route() -> APIError:
    return APIError(404, "the server could not find the requested resource")
