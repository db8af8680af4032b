"""The connections of :class:`.httpserver.ProcessHTTPServer`: one socket thread, a few workers.

The socket thread owns every socket: it accepts, finishes TLS handshakes and reads requests without
blocking, and only a complete request head goes to a worker thread, which makes the answer and writes it.
So an idle or slow client costs a descriptor, never a thread (200 idle connections once left 80 threads
behind). :class:`Limits`: a request head must arrive whole within ``request_timeout`` and fit
``head_bytes``; there is no request body; an idle keep-alive connection is closed after ``idle_timeout``;
a reader that stops reading is cut after ``write_timeout``; past ``max_connections`` the connection quiet
the longest makes room, so a flood of idle or slow connections cannot lock clients out. Probe answers are
written on the socket thread itself, so busy workers cannot fail the kubelet's probes. A client that goes
away costs one log line, not a traceback.
"""

from __future__ import annotations

import logging
import os
import queue
import selectors
import socket
import ssl
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from koordshared.runtime.httpwire import HEAD_END, BadRequest, RequestHead, encode_response, parse_head

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class Limits:
    max_connections: int = 256
    workers: int = 4
    head_bytes: int = 16 * 1024
    request_timeout: float = 10.0
    """Seconds from a request's first byte (or the TLS hello) to its complete head."""
    idle_timeout: float = 120.0
    """Seconds a connection may wait for its next request (Prometheus keeps it open between scrapes)."""
    write_timeout: float = 10.0


_READ = selectors.EVENT_READ
MAX_WAIT = 5.0
"""Seconds the socket thread sleeps at most with no connection deadline due (a safety net only)."""
_CHUNK = 65536


class _Conn:
    """One client connection: its socket, what it sent so far, and when the server gives up on it."""

    __slots__ = ("buf", "deadline", "handshaking", "last", "peer", "sock")

    def __init__(self, sock: socket.socket, peer: str, now: float, handshaking: bool, limits: Limits) -> None:
        self.sock = sock
        self.peer = peer
        self.buf = bytearray()
        self.handshaking = handshaking
        self.last = now
        self.deadline = now + (limits.request_timeout if handshaking else limits.idle_timeout)


class ConnectionLoop:
    """Serves ``listener``: ``probe(req)`` gives the encoded answer of a probe request (None for any
    other), ``respond(req)`` the encoded answer of the rest, on a worker."""

    def __init__(
        self,
        listener: socket.socket,
        *,
        respond: Callable[[RequestHead], bytes],
        probe: Callable[[RequestHead], bytes | None],
        tls: ssl.SSLContext | None = None,
        limits: Limits = Limits(),
    ) -> None:
        self.limits = limits
        self._listener = listener
        self._respond = respond
        self._probe = probe
        self._tls = tls
        listener.setblocking(False)
        self._sel = selectors.DefaultSelector()
        self._sel.register(listener, _READ, None)
        self._wake_r, self._wake_w = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
        self._sel.register(self._wake_r, _READ, None)
        self._conns: dict[int, _Conn] = {}  # by fd; a busy one is with a worker and not in the selector
        self._busy: set[int] = set()
        self._lock = threading.Lock()  # guards _busy and _returned between the socket thread and workers
        self._returned: list[tuple[_Conn, bool]] = []
        self._jobs: queue.SimpleQueue[tuple[_Conn, RequestHead] | None] = queue.SimpleQueue()
        self._stopping = threading.Event()
        self._threads: list[threading.Thread] = []
        self._full_logged = False

    @property
    def address(self) -> tuple[str, int]:
        name = self._listener.getsockname()
        return str(name[0]), int(name[1])

    def open_connections(self) -> int:
        return len(self._conns)

    def start(self) -> None:
        self._threads.append(threading.Thread(target=self._serve, name="http", daemon=True))
        for i in range(self.limits.workers):
            self._threads.append(threading.Thread(target=self._work, name=f"http-worker-{i}", daemon=True))
        for t in self._threads:
            t.start()

    def shutdown(self) -> None:
        """Stop accepting, cut every connection (a worker blocked on a write returns at once), join."""
        if self._stopping.is_set():
            return
        self._stopping.set()
        self._wake()
        deadline = time.monotonic() + 2.0
        if self._threads:
            self._threads[0].join(max(deadline - time.monotonic(), 0.0))
        for conn in list(self._conns.values()):
            try:
                conn.sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        for _ in self._threads[1:]:
            self._jobs.put(None)
        for t in self._threads[1:]:
            t.join(max(deadline - time.monotonic(), 0.0))
        for conn in list(self._conns.values()):
            self._close(conn)
        self._sel.close()
        self._listener.close()
        for fd in (self._wake_r, self._wake_w):
            os.close(fd)
        self._threads.clear()

    # ---- the socket thread ------------------------------------------------------------------------

    def _wake(self) -> None:
        try:
            os.write(self._wake_w, b"x")
        except OSError:  # the pipe is full (a wake is pending anyway) or closed at shutdown
            pass

    def _serve(self) -> None:
        while not self._stopping.is_set():
            for key, _mask in self._sel.select(timeout=self._next_wait(time.monotonic())):
                if key.fileobj is self._listener:
                    self._accept()
                elif key.fileobj == self._wake_r:
                    try:
                        os.read(self._wake_r, 4096)
                    except BlockingIOError:
                        pass
                else:
                    self._readable(key.data)
            self._take_back()
            self._reap(time.monotonic())

    def _accept(self) -> None:
        while True:
            try:
                sock, addr = self._listener.accept()
            except (BlockingIOError, InterruptedError):
                return
            except OSError as err:  # EMFILE and the like: try again on the next readiness
                log.warning("http: accept failed: %s", err)
                return
            if len(self._conns) >= self.limits.max_connections and not self._evict_quietest():
                if not self._full_logged:
                    log.warning("http: %d connections open, all in use: refusing new ones", len(self._conns))
                    self._full_logged = True
                sock.close()
                continue
            self._full_logged = False
            sock.setblocking(False)
            if sock.family in (socket.AF_INET, socket.AF_INET6):
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            peer = f"{addr[0]}:{addr[1]}" if isinstance(addr, tuple) else str(addr)
            if self._tls is not None:
                sock = self._tls.wrap_socket(sock, server_side=True, do_handshake_on_connect=False)
            conn = _Conn(sock, peer, time.monotonic(), self._tls is not None, self.limits)
            self._conns[sock.fileno()] = conn
            self._sel.register(sock, _READ, conn)

    def _evict_quietest(self) -> bool:
        """Close the connection quiet the longest (not with a worker) to make room; False if none.

        Whoever holds connections open without finishing requests is evicted before clients that just
        arrived, so a flood of idle or slow connections cannot lock clients out."""
        with self._lock:
            busy = set(self._busy)
        waiting = [c for fd, c in self._conns.items() if fd not in busy]
        if not waiting:
            return False
        victim = min(waiting, key=lambda c: c.last)
        log.debug("http: closing %s, quiet the longest, to make room", victim.peer)
        self._close(victim)
        return True

    def _readable(self, conn: _Conn) -> None:
        now = time.monotonic()
        if conn.handshaking:
            try:
                conn.sock.do_handshake()  # type: ignore[attr-defined]
            except (ssl.SSLWantReadError, ssl.SSLWantWriteError):
                return
            except (ssl.SSLError, OSError) as err:
                log.info("http: TLS handshake with %s failed: %s", conn.peer, _why(err))
                self._close(conn)
                return
            conn.handshaking = False
            conn.deadline = now + self.limits.idle_timeout
        while True:
            try:
                data = conn.sock.recv(_CHUNK)
            except (BlockingIOError, ssl.SSLWantReadError, ssl.SSLWantWriteError):
                break
            except OSError as err:
                self._dropped(conn, err)
                return
            if not data:
                if conn.buf:
                    log.info("http: %s closed the connection in the middle of a request", conn.peer)
                self._close(conn)
                return
            if not conn.buf:
                conn.deadline = now + self.limits.request_timeout
            conn.buf += data
            conn.last = now
            if len(data) < _CHUNK and not (isinstance(conn.sock, ssl.SSLSocket) and conn.sock.pending()):
                break
        self._dispatch(conn)

    def _dispatch(self, conn: _Conn) -> None:
        """Hand a complete request to a worker (or answer a probe here); refuse what breaks the limits."""
        end = conn.buf.find(HEAD_END)
        if end < 0:
            if len(conn.buf) > self.limits.head_bytes:
                self._refuse(conn, 431, "request head too large")
            return
        if end + len(HEAD_END) > self.limits.head_bytes:
            self._refuse(conn, 431, "request head too large")
            return
        raw = bytes(conn.buf[: end + len(HEAD_END)])
        del conn.buf[: end + len(HEAD_END)]
        try:
            req = parse_head(raw)
        except BadRequest as err:
            self._refuse(conn, err.status, str(err))
            return
        probe = self._probe(req)
        if probe is not None:
            self._answer_probe(conn, req, probe)
            return
        self._sel.unregister(conn.sock)
        with self._lock:
            self._busy.add(conn.sock.fileno())
        self._jobs.put((conn, req))

    def _answer_probe(self, conn: _Conn, req: RequestHead, data: bytes) -> None:
        try:
            # A probe answer is a few dozen bytes: it fits the socket buffer unless the client has stopped
            # reading, and such a client is cut after a second, not served further.
            conn.sock.settimeout(1.0)
            conn.sock.sendall(data)
            conn.sock.setblocking(False)
        except OSError as err:
            self._dropped(conn, err)
            return
        if not req.keep_alive:
            self._close(conn)
            return
        conn.last = time.monotonic()
        conn.deadline = conn.last + (self.limits.request_timeout if conn.buf else self.limits.idle_timeout)
        if conn.buf:
            self._dispatch(conn)

    def _refuse(self, conn: _Conn, status: int, message: str) -> None:
        log.debug("http: %s: %d %s", conn.peer, status, message)
        data = encode_response(
            status, "text/plain; charset=utf-8", (message + "\n").encode(), keep_alive=False
        )
        try:
            conn.sock.send(data)  # best effort: the connection is closed either way
        except (OSError, ssl.SSLError):
            pass
        self._close(conn)

    def _take_back(self) -> None:
        """Connections the workers finished with go back to the selector (or straight on, if the client
        already sent its next request), or are closed."""
        with self._lock:
            back, self._returned = self._returned, []
        now = time.monotonic()
        for conn, keep in back:
            if not keep or self._stopping.is_set():
                self._close(conn)
                continue
            conn.last = now
            conn.deadline = now + (self.limits.request_timeout if conn.buf else self.limits.idle_timeout)
            self._sel.register(conn.sock, _READ, conn)
            if conn.buf or (isinstance(conn.sock, ssl.SSLSocket) and conn.sock.pending()):
                self._readable(conn)

    def _next_wait(self, now: float) -> float:
        """Seconds until the nearest connection deadline (at most :data:`MAX_WAIT`): everything else
        (a new connection, a request, a worker's hand-back, shutdown) wakes the selector itself, and a
        fixed half-second poll was two of an idle agent's twenty wake-ups a second."""
        with self._lock:
            busy = set(self._busy)  # a worker's connection has no deadline until it comes back
        deadlines = [c.deadline for fd, c in self._conns.items() if fd not in busy]
        return min(max(min(deadlines, default=now + MAX_WAIT) - now, 0.0), MAX_WAIT)

    def _reap(self, now: float) -> None:
        with self._lock:
            busy = set(self._busy)
        for fd, conn in list(self._conns.items()):
            if fd in busy or conn.deadline > now:
                continue
            if conn.buf or conn.handshaking:
                log.info(
                    "http: %s sent no complete request in %.0fs; closed",
                    conn.peer,
                    self.limits.request_timeout,
                )
            else:
                log.debug("http: %s idle for %.0fs; closed", conn.peer, self.limits.idle_timeout)
            self._close(conn)

    def _close(self, conn: _Conn) -> None:
        fd = conn.sock.fileno()
        if fd >= 0:
            self._conns.pop(fd, None)
            with self._lock:
                self._busy.discard(fd)
            try:
                self._sel.unregister(conn.sock)
            except (KeyError, ValueError, RuntimeError):
                pass
        try:
            conn.sock.close()
        except OSError:
            pass

    def _dropped(self, conn: _Conn, err: BaseException) -> None:
        log.info("http: %s went away: %s", conn.peer, _why(err))
        self._close(conn)

    # ---- the workers ------------------------------------------------------------------------------

    def _work(self) -> None:
        while True:
            job = self._jobs.get()
            if job is None:
                return
            conn, req = job
            try:
                keep = self._answer(conn, req)
            except Exception:  # a bug here must not kill the worker
                log.exception("http: answering %s %s failed", req.method, req.path)
                keep = False
            with self._lock:
                # The socket thread owns the connection table and the selector: it takes the connection
                # back (or closes it) on its next turn.
                self._busy.discard(conn.sock.fileno())
                self._returned.append((conn, keep))
            self._wake()

    def _answer(self, conn: _Conn, req: RequestHead) -> bool:
        """Write the answer to ``req``; True when the connection stays open for another request."""
        data = self._respond(req)
        try:
            conn.sock.settimeout(self.limits.write_timeout)
            conn.sock.sendall(data)
            conn.sock.setblocking(False)
        except OSError as err:
            log.info("http: %s went away during %s %s: %s", conn.peer, req.method, req.path, _why(err))
            return False
        return req.keep_alive


def _why(err: BaseException) -> str:
    if isinstance(err, ssl.SSLError):
        return err.reason or str(err)
    if isinstance(err, OSError) and err.strerror:
        return err.strerror
    return type(err).__name__ if not str(err) else str(err)
