"""The shared list+watch cache (client-go's reflector + indexer + event handlers) on the official client.

One :class:`Informer` per resource and selector: a paged list fills the cache, a watch keeps it current and
resumes from the last resourceVersion after a break (a 410 Gone re-lists, diffed against the cache so
handlers see the gap as events). Handlers run on the informer's thread, one at a time; cached objects are
shared, read-only dicts, trimmed by a ``transform`` before caching. Details: ``docs/modules.md``."""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from koordshared.kube.client import ApiError, call, listed_items, status_of
from koordshared.kube.ratelimit import Backoff

log = logging.getLogger(__name__)

Obj = Mapping[str, Any]
IndexFunc = Callable[[Obj], Sequence[str]]
ListFunc = Callable[..., Any]


def object_key(obj: Obj) -> str:
    """client-go's ``MetaNamespaceKeyFunc``: ``namespace/name``, or ``name`` for cluster-scoped objects (a
    pod's key: :func:`koordshared.apis.core.pod.pod_key`)."""
    meta = obj.get("metadata") or {}
    ns, name = meta.get("namespace") or "", str(meta.get("name") or "")
    return f"{ns}/{name}" if ns else name


def index_by_node(obj: Obj) -> Sequence[str]:
    """The node an object belongs to: ``spec.nodeName`` for pods, else the name (Node, NodeMetric...)."""
    spec = obj.get("spec")
    if obj.get("kind") == "Pod" or (isinstance(spec, Mapping) and "containers" in spec):
        node = spec.get("nodeName") if isinstance(spec, Mapping) else None
        return (str(node),) if node else ()
    return (str((obj.get("metadata") or {}).get("name") or ""),)


def without_managed_fields(obj: Obj) -> Obj:
    """A ``transform`` dropping ``metadata.managedFields`` (server-side apply bookkeeping, often the
    largest part of a small object, which no reader of ours uses)."""
    meta = obj.get("metadata")
    if not isinstance(meta, Mapping) or "managedFields" not in meta:
        return obj
    return {**obj, "metadata": {k: v for k, v in meta.items() if k != "managedFields"}}


@dataclass(frozen=True, slots=True)
class EventHandler:
    """``on_update(old, new)`` also fires on resync with ``old is new``."""

    on_add: Callable[[Obj], None] | None = None
    on_update: Callable[[Obj, Obj], None] | None = None
    on_delete: Callable[[Obj], None] | None = None


class _Gone(Exception):
    """The resourceVersion (or continue token) is too old: list again."""


class _Abandoned(Exception):
    """A list given up between pages because the informer is stopping (not an error: ``run`` returns)."""


class _Ahead:
    """A request run on a thread of its own while the caller works on what came before; :meth:`result`
    gives its answer or raises its error."""

    def __init__(self, name: str, fn: Callable[[], Mapping[str, Any]]) -> None:
        self._fn = fn
        self._done = threading.Event()
        self._answer: Mapping[str, Any] = {}
        self._error: BaseException | None = None
        threading.Thread(target=self._run, name=name, daemon=True).start()

    def _run(self) -> None:
        try:
            self._answer = self._fn()
        except BaseException as err:  # handed to the caller, which handles it as its own
            self._error = err
        finally:
            self._done.set()

    def result(self) -> Mapping[str, Any]:
        self._done.wait()
        if self._error is not None:
            raise self._error
        return self._answer


SHORT_WATCH = 1.0
"""A watch that ends normally sooner than this (seconds) without a single event is an error (client-go's
"very short watch"): a server that answers and hangs up at once must not be re-watched in a hot loop."""


def _rv(obj: Obj) -> str:
    return str((obj.get("metadata") or {}).get("resourceVersion") or "")


class Informer:
    """A cache of one resource kept by list+watch; :meth:`run` blocks until ``stop`` or :meth:`close`."""

    def __init__(
        self,
        name: str,
        list_fn: ListFunc,
        kwargs: Mapping[str, Any] | None = None,
        *,
        page_size: int = 500,
        watch_timeout: float = 300.0,
        request_timeout: float = 10.0,
        backoff: Backoff | None = None,
        indexers: Mapping[str, IndexFunc] | None = None,
        on_error: Callable[[BaseException], None] | None = None,
        on_health: Callable[[bool], None] | None = None,
        transform: Callable[[Obj], Obj] | None = None,
        list_parts: Sequence[str] = (),
        hold: Callable[[], bool] | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.name = name
        self._parts = tuple(list_parts)
        self._hold = hold
        self._stop: threading.Event | None = None
        self._clock = clock
        self._transform = transform
        self._list_fn = list_fn
        self._kwargs = dict(kwargs or {})
        self.page_size = page_size
        self.watch_timeout = watch_timeout
        self.request_timeout = request_timeout
        self.backoff = backoff or Backoff(initial=0.2, cap=30.0)
        self._on_error = on_error
        self._on_health = on_health
        self._healthy = threading.Event()
        self._indexers = dict(indexers or {})
        self._lock = threading.Lock()
        self._dispatch = threading.Lock()
        self._items: dict[str, Obj] = {}
        self._indices: dict[str, dict[str, set[str]]] = {n: {} for n in self._indexers}
        self._handlers: list[EventHandler] = []
        self._synced = threading.Event()
        self._closed = threading.Event()
        self._resp: Any = None
        self.resource_version = ""
        self.lists = 0
        self.watches = 0

    # ---- reading ------------------------------------------------------------------------------

    def has_synced(self) -> bool:
        """The first list has been applied (and its handlers called)."""
        return self._synced.is_set()

    def healthy(self) -> bool:
        """The last list or watch request was answered, so the cache follows the server. False before
        the first list, and from an error (connection, 5xx, a broken stream) until the next list or
        watch is answered: a watch resumed from its resourceVersion replays the gap, so no re-list is
        needed to trust the cache again."""
        return self._healthy.is_set()

    def get(self, key: str) -> Obj | None:
        with self._lock:
            return self._items.get(key)

    def objects(self) -> list[Obj]:
        with self._lock:
            return list(self._items.values())

    def keys(self) -> list[str]:
        with self._lock:
            return list(self._items)

    def by_index(self, index: str, value: str) -> list[Obj]:
        with self._lock:
            keys = self._indices[index].get(value, ())
            return [self._items[k] for k in keys]

    def __len__(self) -> int:
        with self._lock:
            return len(self._items)

    def add_handler(self, handler: EventHandler) -> None:
        """Register a handler; objects already cached are replayed to it as adds."""
        with self._dispatch:
            self._handlers.append(handler)
            if handler.on_add is not None:
                for obj in self.objects():
                    self._safe(handler.on_add, obj)

    # ---- cache maintenance --------------------------------------------------------------------

    def _index(self, key: str, obj: Obj | None, old: Obj | None) -> None:
        for name, fn in self._indexers.items():
            idx = self._indices[name]
            if old is not None:
                for value in fn(old):
                    keys = idx.get(value)
                    if keys is not None:
                        keys.discard(key)
                        if not keys:
                            del idx[value]
            if obj is not None:
                for value in fn(obj):
                    idx.setdefault(value, set()).add(key)

    def _safe(self, fn: Callable[..., None], *args: Obj) -> None:
        try:
            fn(*args)
        except Exception:
            log.exception("%s: event handler failed", self.name)

    def _notify(self, old: Obj | None, new: Obj | None) -> None:
        for h in self._handlers:
            if new is None and old is not None and h.on_delete is not None:
                self._safe(h.on_delete, old)
            elif new is not None and old is None and h.on_add is not None:
                self._safe(h.on_add, new)
            elif new is not None and old is not None and h.on_update is not None:
                self._safe(h.on_update, old, new)

    def _apply(self, typ: str, obj: Obj) -> None:
        key = object_key(obj)
        with self._dispatch:
            with self._lock:
                old = self._items.get(key)
                if typ == "DELETED":
                    self._items.pop(key, None)
                    self._index(key, None, old)
                else:
                    self._items[key] = obj
                    self._index(key, obj, old)
            if typ == "DELETED":
                self._notify(old if old is not None else obj, None)
            else:
                self._notify(old, obj)

    def _replace(self, items: Sequence[Obj]) -> None:
        fresh = {object_key(o): o for o in items}
        with self._dispatch:
            with self._lock:
                old_items = self._items
                self._items = fresh
                self._indices = {n: {} for n in self._indexers}
                for key, obj in fresh.items():
                    self._index(key, obj, None)
            for key, obj in old_items.items():
                if key not in fresh:
                    self._notify(obj, None)
            for key, obj in fresh.items():
                old = old_items.get(key)
                if old is None or _rv(old) != _rv(obj):
                    self._notify(old, obj)
        self._synced.set()

    def resync(self) -> None:
        """Replay every cached object to the update handlers (``old is new``)."""
        with self._dispatch:
            for obj in self.objects():
                self._notify(obj, obj)

    # ---- list and watch -----------------------------------------------------------------------

    def _list(self) -> str:
        """List every part (``list_parts``; the whole selection when none) at the first part's
        resourceVersion, each page asked for while the one before is trimmed and applied. A re-list
        replaces the cache (diffed into events). The first list into an empty cache adds each page as
        it comes (handlers see adds, as from client-go's first list); the cache is synced at its end, or
        with ``list_parts`` once every part but the last is whole and the last has its first page in."""
        parts = self._parts or ("",)
        with self._lock:
            first = not self._synced.is_set() and not self._items
        items: list[Obj] = []
        rv = ""
        for n, part in enumerate(parts):
            for objs, page_rv in self._pages(part, rv):
                rv = rv or page_rv
                if not first:
                    items.extend(objs)
                    continue
                self._add(objs)
                if self._parts and n == len(parts) - 1 and not self._synced.is_set():
                    self._synced.set()
                    self._wait_hold()
        if not first:
            self._replace(items)
        self._synced.set()
        self.lists += 1
        self.resource_version = rv
        return rv

    def _wait_hold(self) -> None:
        """With ``hold``, the rest of a first list in parts waits until it is true: the process's other
        caches, still listing, then do not share the interpreter with it (the next page, already asked
        for, is the only one decoded meanwhile)."""
        while self._hold is not None and not self._hold():
            if self._closed.wait(0.01) or self._stopping():
                return

    def _stopping(self) -> bool:
        return self._closed.is_set() or (self._stop is not None and self._stop.is_set())

    def _add(self, objs: Sequence[Obj]) -> None:
        with self._dispatch:
            with self._lock:
                olds = []
                for obj in objs:
                    key = object_key(obj)
                    old = self._items.get(key)
                    self._items[key] = obj
                    self._index(key, obj, old)
                    olds.append(old)
            for old, obj in zip(olds, objs, strict=True):
                self._notify(old, obj)

    def _pages(self, part: str, rv: str) -> Iterator[tuple[list[Obj], str]]:
        """The transformed pages of one part of the list and the list's resourceVersion; a part after the
        first reads at ``rv`` exactly, so all parts are one snapshot the watch resumes from. The next
        page is asked for before this one is trimmed: the server makes it meanwhile."""
        kwargs = dict(self._kwargs)
        if part:
            base = kwargs.get("field_selector")
            kwargs["field_selector"] = f"{base},{part}" if base else part
        limit: dict[str, Any] = {"limit": self.page_size} if self.page_size > 0 else {}
        exact = {"resource_version": rv, "resource_version_match": "Exact"} if rv else {}
        doc = self._page(kwargs, {**limit, **exact}, expires=bool(rv))
        while True:
            meta = doc.get("metadata") or {}
            token = str(meta.get("continue") or "")
            ahead = None
            if token:
                opts = {**limit, "_continue": token}
                ahead = _Ahead(f"{self.name}-page", lambda opts=opts: self._page(kwargs, opts, expires=True))  # type: ignore[misc]
            page = listed_items(doc)
            yield (
                list(map(self._transform, page)) if self._transform is not None else page,
                str(meta.get("resourceVersion") or ""),
            )
            if ahead is None:
                return
            if self._stopping():
                # a large first list is many pages: a stopped process must not wait for the rest
                raise _Abandoned(f"{self.name}: list abandoned at stop")
            doc = ahead.result()

    def _page(
        self, kwargs: Mapping[str, Any], opts: Mapping[str, Any], *, expires: bool
    ) -> Mapping[str, Any]:
        try:
            doc = call(
                f"{self.name} list",
                lambda: self._list_fn(
                    **kwargs, **opts, _preload_content=False, _request_timeout=self.request_timeout
                ),
            )
        except ApiError as err:
            if err.gone and expires:
                raise _Gone() from err  # the continue token or the snapshot expired: list again
            raise
        return doc if isinstance(doc, Mapping) else {}

    def _lines(self, resp: Any) -> Iterator[bytes]:
        buf = b""
        for chunk in resp.stream(amt=None, decode_content=True):
            buf += chunk
            *lines, buf = buf.split(b"\n")
            yield from (line for line in lines if line.strip())
        if buf.strip():
            yield buf

    def _watch(self, rv: str) -> str:
        try:
            resp = self._list_fn(
                **self._kwargs,
                watch=True,
                resource_version=rv,
                allow_watch_bookmarks=True,
                timeout_seconds=max(int(self.watch_timeout), 1),
                _preload_content=False,
                _request_timeout=(self.request_timeout, self.watch_timeout + self.request_timeout),
            )
        except Exception as err:
            if status_of(err) == 410:
                raise _Gone() from err
            raise
        self._set_healthy(True)  # answered: the stream replays whatever changed since ``rv``
        with self._lock:
            self._resp = resp
        if self._closed.is_set():
            self._cut(resp)
        self.watches += 1
        started, events = self._clock(), 0
        try:
            for line in self._lines(resp):
                events += 1
                event = json.loads(line)
                typ, obj = event.get("type"), event.get("object")
                if not isinstance(obj, Mapping):
                    continue
                if typ == "ERROR":
                    code = obj.get("code")
                    if code == 410:
                        raise _Gone()
                    raise ApiError(
                        f"{self.name} watch",
                        int(code or 0),
                        str(obj.get("reason", "")),
                        str(obj.get("message", "")),
                    )
                rv = self.resource_version = _rv(obj) or rv
                if typ in ("ADDED", "MODIFIED", "DELETED"):
                    self._apply(str(typ), obj if self._transform is None else self._transform(obj))
                self.backoff.reset()
        finally:
            with self._lock:
                self._resp = None
            resp.release_conn()
        if not events and self._clock() - started < SHORT_WATCH and not self._closed.is_set():
            raise ApiError(f"{self.name} watch", 0, "VeryShortWatch", "ended at once without an event")
        return rv

    def run(self, stop: threading.Event) -> None:
        """Until ``stop`` (or :meth:`close`): list, then watch; recover from every error by itself."""
        self._stop = stop
        rv = ""
        while not stop.is_set() and not self._closed.is_set():
            try:
                if not rv:
                    rv = self._list()
                    self.backoff.reset()
                    self._set_healthy(True)
                rv = self._watch(rv)
            except _Gone:
                log.info("%s: resourceVersion %s expired (410), listing again", self.name, rv or "-")
                rv = ""
            except Exception as err:  # API errors, connection errors, bad JSON alike: back off, resume
                if stop.is_set() or self._closed.is_set():
                    return  # close() cut the stream: not an error
                delay = self.backoff.next()
                log.warning("%s: %s; retrying in %.1fs", self.name, str(err) or type(err).__name__, delay)
                self._set_healthy(False)
                if self._on_error is not None:
                    self._on_error(err)
                if stop.wait(delay):
                    return

    def _set_healthy(self, ok: bool) -> None:
        # Only the run thread calls this, so test-then-set needs no lock.
        if ok == self._healthy.is_set():
            return
        if ok:
            self._healthy.set()
            log.info("%s: the cache follows the server", self.name)
        else:
            self._healthy.clear()  # the loop has logged why
        if self._on_health is not None:
            try:
                self._on_health(ok)
            except Exception:
                log.exception("%s: health hook failed", self.name)

    @staticmethod
    def _cut(resp: Any) -> None:
        shutdown = getattr(resp, "shutdown", None)
        try:
            if shutdown is not None:
                shutdown()
            else:
                resp.close()
        except Exception:  # already closed
            pass

    def close(self) -> None:
        """End :meth:`run` promptly, cutting a watch blocked on its socket."""
        self._closed.set()
        with self._lock:
            resp = self._resp
        if resp is not None:
            self._cut(resp)
