"""The listening side of the test API server: one thread per connection, each tracked so ``down()`` and
``stop()`` can cut it and join its thread, and, with TLS, the handshake done in that thread (bounded by
:data:`tests.apiserver.tls.HANDSHAKE_TIMEOUT`) before the request handler reads from it.
"""

from __future__ import annotations

import socket
import ssl
import sys
import threading
from http.server import ThreadingHTTPServer
from typing import TYPE_CHECKING, Any

from tests.apiserver.handler import Handler
from tests.apiserver.tls import HANDSHAKE_TIMEOUT

if TYPE_CHECKING:
    from tests.apiserver.server import APIServer

THREAD_PREFIX = "test-apiserver"


class ConnectionServer(ThreadingHTTPServer):
    """Tracks connection threads so ``down()``/``stop()`` can cut them and join them."""

    daemon_threads = True
    block_on_close = False  # joined by close_connections(), with a deadline

    def __init__(self, address: tuple[str, int], api: APIServer, tls: ssl.SSLContext | None) -> None:
        self.api = api
        self.tls = tls
        self._conn_lock = threading.Lock()
        self._conns: dict[socket.socket, threading.Thread] = {}
        super().__init__(address, Handler)

    def process_request(self, request: Any, client_address: Any) -> None:
        t = threading.Thread(
            target=self._serve_connection,
            args=(request, client_address),
            name=f"{THREAD_PREFIX}-conn",
            daemon=True,
        )
        with self._conn_lock:
            self._conns[request] = t
        t.start()

    def _serve_connection(self, request: Any, client_address: Any) -> None:
        if self.tls is not None:
            wrapped = self.tls.wrap_socket(request, server_side=True, do_handshake_on_connect=False)
            with self._conn_lock:  # the plain socket is detached now: cut the TLS one on down()/stop()
                self._conns[wrapped] = self._conns.pop(request, threading.current_thread())
            try:
                wrapped.settimeout(HANDSHAKE_TIMEOUT)
                wrapped.do_handshake()
                wrapped.settimeout(None)
            except OSError:  # not TLS, a bad certificate, or the server is stopping
                self.shutdown_request(wrapped)
                return
            request = wrapped
        self.process_request_thread(request, client_address)

    def handle_error(self, request: Any, client_address: Any) -> None:
        # A client that resets or drops its connection mid-request (a bench stopping its clients, an
        # informer cut at shutdown) is routine for an API server: kube-apiserver logs nothing for it.
        # socketserver's default prints a traceback for each; keep that only for real handler faults.
        if isinstance(sys.exc_info()[1], (ConnectionResetError, BrokenPipeError, ConnectionAbortedError)):
            return
        super().handle_error(request, client_address)

    def shutdown_request(self, request: Any) -> None:
        with self._conn_lock:
            self._conns.pop(request, None)
        super().shutdown_request(request)

    def close_connections(self, timeout: float) -> list[threading.Thread]:
        """Cut every open connection and join its thread; returns threads still alive after ``timeout``."""
        with self._conn_lock:
            conns = list(self._conns.items())
        for sock, _ in conns:
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        for _, thread in conns:
            thread.join(timeout)
        return [t for _, t in conns if t.is_alive()]
