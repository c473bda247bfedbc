"""A TCP proxy in front of the test PostgreSQL server, to drop connections and take the
"server" away and back on purpose (a failover, a restart, `pg_terminate_backend`) without
touching the real server that other tests use."""

from __future__ import annotations

import socket
import threading
from urllib.parse import urlsplit, urlunsplit


class TcpProxy:
    """Forward 127.0.0.1:`port` to `target` (host, port).

    `drop()` ends every open connection (the listener stays: new connections work);
    `stop()` also closes the listener (connections are refused until `start()`).
    """

    def __init__(self, target: tuple[str, int]):
        self.target = target
        self.port = 0
        self._listener: socket.socket | None = None
        self._conns: set[socket.socket] = set()
        self._lock = threading.Lock()
        self.start()

    def url(self, url: str) -> str:
        """`url` with its host and port replaced by the proxy's."""
        parts = urlsplit(url)
        netloc = parts.netloc.rsplit("@", 1)
        where = f"127.0.0.1:{self.port}"
        return urlunsplit(
            parts._replace(netloc=f"{netloc[0]}@{where}" if len(netloc) > 1 else where)
        )

    def start(self) -> None:
        listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind(("127.0.0.1", self.port))
        listener.listen(64)
        self.port = listener.getsockname()[1]
        self._listener = listener
        threading.Thread(target=self._accept, args=(listener,), daemon=True).start()

    def _accept(self, listener: socket.socket) -> None:
        while True:
            try:
                client, _ = listener.accept()
            except OSError:
                return
            try:
                upstream = socket.create_connection(self.target)
            except OSError:
                client.close()
                continue
            with self._lock:
                self._conns.update((client, upstream))
            for a, b in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pump, args=(a, b), daemon=True).start()

    def _pump(self, src: socket.socket, dst: socket.socket) -> None:
        try:
            while data := src.recv(65536):
                dst.sendall(data)
        except OSError:
            pass
        finally:
            for s in (src, dst):
                self._close(s)

    def _close(self, sock: socket.socket) -> None:
        with self._lock:
            self._conns.discard(sock)
        try:
            sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        sock.close()

    def drop(self) -> None:
        with self._lock:
            conns = list(self._conns)
        for sock in conns:
            self._close(sock)

    def stop(self) -> None:
        if self._listener is not None:
            try:  # wakes the thread blocked in accept(); close() alone would not
                self._listener.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            self._listener.close()
            self._listener = None
        self.drop()

    def connections(self) -> int:
        with self._lock:
            return len(self._conns) // 2
