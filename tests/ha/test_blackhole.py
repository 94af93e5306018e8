"""The black-hole proxy of the partition faults (bench/ha/blackhole.py), on a plain echo server:
a chaos storm sends thousands of short connections through it."""

from __future__ import annotations

import os
import socket
import threading
from collections.abc import Iterator

import pytest
from bench.ha.blackhole import Blackhole

from tests.helpers.polling import wait_for


@pytest.fixture
def echo() -> Iterator[int]:
    """A TCP server on a free port that sends back what it receives."""
    server = socket.create_server(("127.0.0.1", 0))

    def serve(conn: socket.socket) -> None:
        with conn:
            while data := conn.recv(4096):
                conn.sendall(data)

    def accept() -> None:
        while True:
            try:
                conn, _ = server.accept()
            except OSError:
                return
            threading.Thread(target=serve, args=(conn,), daemon=True).start()

    threading.Thread(target=accept, daemon=True).start()
    yield server.getsockname()[1]
    server.close()


def _open_fds() -> int:
    return len(os.listdir("/proc/self/fd"))


def test_connections_that_ended_leave_no_socket_open_in_the_proxy(echo: int) -> None:
    with Blackhole(echo) as proxy:
        before = _open_fds()
        for n in range(40):
            with socket.create_connection(("127.0.0.1", proxy.port), timeout=5) as client:
                client.sendall(b"ping %d" % n)
                assert client.recv(64) == b"ping %d" % n
        # each ended connection's two sockets (to the client, to the server) are closed
        wait_for(
            lambda: _open_fds() <= before + 2,
            "the proxy to close ended connections",
            log=lambda: f"{_open_fds() - before} file descriptors more than before",
        )


def test_a_black_holed_connection_holds_its_bytes_and_delivers_them_on_restore(echo: int) -> None:
    with (
        Blackhole(echo) as proxy,
        socket.create_connection(("127.0.0.1", proxy.port), timeout=5) as client,
    ):
        client.sendall(b"before")
        assert client.recv(64) == b"before"
        proxy.blackhole()
        client.sendall(b"during")
        client.settimeout(1.0)
        with pytest.raises(TimeoutError):  # no answer, and no error: a cut cable
            client.recv(64)
        proxy.restore()
        client.settimeout(5)
        assert client.recv(64) == b"during"
