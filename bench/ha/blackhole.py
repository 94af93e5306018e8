"""A TCP proxy in front of one server that can black-hole its traffic: a network partition.

While black-holed the proxy stops forwarding in both directions but never resets or closes a
connection, as a cut cable does: bytes already sent wait in the kernel's buffers, the peers see
no error (TCP keepalives are still answered by the kernels at both ends), and a call waiting for
an answer just waits. `restore()` lets the held bytes through, in order. New connections are
accepted while black-holed and then hang like the others.
"""

from __future__ import annotations

import contextlib
import select
import socket
import threading
from types import TracebackType

CHUNK = 65536
TICK = 0.05  # seconds a black-holed pump waits before it looks at the flag again
IDLE = 0.5  # seconds a flowing pump waits for bytes before it looks at close()


class Blackhole:
    """Listens on 127.0.0.1 (a free port) and forwards every connection to `target`."""

    def __init__(self, target_port: int, target_host: str = "127.0.0.1") -> None:
        self.target = (target_host, target_port)
        self._server = socket.create_server(("127.0.0.1", 0))
        self.port: int = self._server.getsockname()[1]
        self._flowing = threading.Event()
        self._flowing.set()
        self._closed = threading.Event()
        self._lock = threading.Lock()
        self._sockets: list[socket.socket] = []
        self._threads: list[threading.Thread] = []
        self._spawn(self._accept, "accept")

    def blackhole(self) -> None:
        """Stop forwarding, in both directions, on every connection (new ones too)."""
        self._flowing.clear()

    def restore(self) -> None:
        """Forward again, delivering what was held back."""
        self._flowing.set()

    def drop_all(self) -> None:
        """Close every connection (a reset, as a crashed server gives): not a partition."""
        with self._lock:
            sockets, self._sockets = self._sockets, []
        for sock in sockets:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
            sock.close()

    def close(self) -> None:
        self._closed.set()
        self._flowing.set()
        self._server.close()
        self.drop_all()
        for thread in self._threads:
            thread.join(5)

    def __enter__(self) -> Blackhole:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def _spawn(self, target: object, name: str, *args: object) -> None:
        self._threads = [t for t in self._threads if t.is_alive()]  # a storm opens thousands
        thread = threading.Thread(
            target=target,  # type: ignore[arg-type]
            args=args,
            name=f"blackhole-{self.port}-{name}",
            daemon=True,
        )
        self._threads.append(thread)
        thread.start()

    def _accept(self) -> None:
        while not self._closed.is_set():
            try:
                readable, _, _ = select.select([self._server], [], [], TICK)
                if not readable:
                    continue
                client, _ = self._server.accept()
            except (OSError, ValueError):  # closed under select(): fd -1
                return
            try:
                upstream = socket.create_connection(self.target, timeout=5)
                upstream.settimeout(None)
            except OSError:
                client.close()
                continue
            with self._lock:
                self._sockets += [client, upstream]
            pumps = [2]  # running pumps of this connection: the last one closes its sockets
            self._spawn(self._pump, "up", client, upstream, pumps)
            self._spawn(self._pump, "down", upstream, client, pumps)

    def _pump(self, source: socket.socket, sink: socket.socket, pumps: list[int]) -> None:
        try:
            while not self._closed.is_set():
                if not self._flowing.wait(TICK):
                    continue  # black-holed: leave the bytes in the kernel's buffer
                readable, _, _ = select.select([source], [], [], IDLE)
                if not readable or not self._flowing.is_set():
                    continue
                data = source.recv(CHUNK)
                if not data:
                    break
                sink.sendall(data)
        except (OSError, ValueError):  # ValueError: the other side closed the socket (fd -1)
            pass
        finally:
            # one side ended: end the other, as the server or client would see it
            for sock in (source, sink):
                with contextlib.suppress(OSError):
                    sock.shutdown(socket.SHUT_RDWR)
            with self._lock:
                pumps[0] -= 1
                last = pumps[0] == 0
                if last:
                    self._sockets = [s for s in self._sockets if s not in (source, sink)]
            if last:
                source.close()
                sink.close()
