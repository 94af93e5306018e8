"""A private pgbouncer (Debian's 1.18) in front of one Postgres server, in transaction mode by
default: for the pooler tests, and for the chaos storms' pooled replicas and pooler faults.

In front of a Patroni cluster it is pointed at the primary and moved after a failover
(`point_at`), as a role-change callback or a router on Patroni's REST API does: a pgbouncer beside
each node cannot be chosen by libpq's target_session_attrs, because pgbouncer hands every client
the in_hot_standby its pool saw first (pgbouncer issue #859), so a demoted node still looks
writable through it.

It refuses to run as root, so as root it runs as the `postgres` OS user; its files live in a
temp dir of its own. It can be killed (every client and server connection drops at once, in the
middle of whatever transaction) and started again on the same port, or paused (PAUSE: it lets
the transactions in flight finish, then holds every new one until RESUME).
"""

from __future__ import annotations

import contextlib
import os
import pwd
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
from psycopg.conninfo import conninfo_to_dict, make_conninfo

from claimsched.tools.postgres import free_port
from claimsched.tools.processes import stop_process


class MissingPgbouncer(RuntimeError):
    """No pgbouncer binary: what to install."""


def binary() -> str:
    found = shutil.which("pgbouncer") or "/usr/sbin/pgbouncer"
    if not os.access(found, os.X_OK):
        raise MissingPgbouncer(
            "the pooler needs pgbouncer: apt-get install pgbouncer (scripts/bootstrap.sh)"
        )
    return found


class Pgbouncer:
    """A pgbouncer for every database of the server behind `server_dsn`; `dsn_for(dsn)` is `dsn`
    (a database of that server) through it."""

    def __init__(self, server_dsn: str, pool_mode: str = "transaction", pool_size: int = 4,
                 max_client_conn: int = 500) -> None:
        self.server_dsn = server_dsn
        self._binary = binary()
        self.folder = Path(tempfile.mkdtemp(prefix="claimsched-bouncer-"))
        self.port = free_port()
        self.process: subprocess.Popen[bytes] | None = None
        (self.folder / "userlist.txt").write_text('"postgres" ""\n')
        self._settings = (
            "[pgbouncer]\n"
            "listen_addr = 127.0.0.1\n"
            f"listen_port = {self.port}\n"
            "unix_socket_dir =\n"
            "auth_type = trust\n"
            f"auth_file = {self.folder}/userlist.txt\n"
            "admin_users = postgres\n"
            f"pool_mode = {pool_mode}\n"
            f"default_pool_size = {pool_size}\n"
            f"max_client_conn = {max_client_conn}\n"
            # after a failed server login pgbouncer waits this long before the next (1.18: 15 s),
            # holding every client meanwhile: the docs' recommended 1 s, not a 15-s blind spot
            # after each outage or failover
            "server_login_retry = 1\n"
            f"logfile = {self.folder}/pgbouncer.log\n"
            f"pidfile = {self.folder}/pgbouncer.pid\n"
        )
        self._write(server_dsn)
        self._user: dict[str, Any] = {}
        if os.geteuid() == 0:
            account = pwd.getpwnam("postgres")
            for path in (self.folder, *self.folder.iterdir()):
                os.chown(path, account.pw_uid, account.pw_gid)
            self._user = {"user": account.pw_uid, "group": account.pw_gid, "extra_groups": []}

    def _write(self, server_dsn: str) -> None:
        server = conninfo_to_dict(server_dsn)
        (self.folder / "pgbouncer.ini").write_text(
            "[databases]\n"
            f"* = host={server.get('host', '127.0.0.1')} port={server.get('port', 5432)}\n"
            + self._settings
        )

    def point_at(self, server_dsn: str) -> None:
        """Send new server connections to another server (RELOAD: the connections to the
        previous one close as they are released), as a Patroni on_role_change callback does
        after a failover."""
        self.server_dsn = server_dsn
        self._write(server_dsn)
        self.admin("RELOAD")

    def dsn_for(self, dsn: str) -> str:
        """`dsn` (a database of the server, or of the cluster it fronts) reached through the
        pooler's `*` fallback entry: its other parameters are kept, but target_session_attrs
        (libpq would judge the pooler by the parameters it repeats from its pool's first server
        connection: after a failover, a primary that still looks read-only)."""
        params = conninfo_to_dict(dsn)
        params.pop("target_session_attrs", None)
        params.pop("hostaddr", None)
        return make_conninfo("", **{
            **params,
            "host": "127.0.0.1",
            "port": str(self.port),
            "dbname": str(params.get("dbname", "postgres")),
            "user": str(params.get("user", "postgres")),
        })

    @property
    def running(self) -> bool:
        return self.process is not None and self.process.poll() is None

    @property
    def admin_dsn(self) -> str:
        return f"host=127.0.0.1 port={self.port} dbname=pgbouncer user=postgres"

    def admin(self, command: str) -> list[tuple[object, ...]]:
        with psycopg.connect(self.admin_dsn, autocommit=True, prepare_threshold=None,
                             connect_timeout=5) as conn:
            cur = conn.execute(command)
            return cur.fetchall() if cur.description else []

    def log(self) -> str:
        with contextlib.suppress(OSError):
            return (self.folder / "pgbouncer.log").read_text(errors="replace")
        return "(no log)"

    def start(self, timeout: float = 10.0) -> None:
        """Start it on its port and wait until it listens, or raise with its stderr."""
        with contextlib.suppress(FileNotFoundError):
            (self.folder / "pgbouncer.pid").unlink()  # a killed one leaves it behind
        with open(self.folder / "stderr.log", "ab") as stderr:
            self.process = process = subprocess.Popen(
                [self._binary, str(self.folder / "pgbouncer.ini")],
                stdout=subprocess.DEVNULL,
                stderr=stderr,
                start_new_session=True,
                **self._user,
            )
        deadline = time.monotonic() + timeout
        while process.poll() is None and not _listening(self.port):
            if time.monotonic() > deadline:
                raise RuntimeError(f"pgbouncer did not listen within {timeout:.0f} s:\n"
                                   + self.log()[-2000:])
            time.sleep(0.05)
        if process.poll() is not None:
            raise RuntimeError(
                "pgbouncer did not start:\n" + (self.folder / "stderr.log").read_text()[-2000:]
            )

    def kill(self) -> None:
        """SIGKILL: every client's and server's connection drops, whatever was in flight."""
        if self.process is not None and self.running:
            self.process.send_signal(signal.SIGKILL)
            self.process.wait(10)

    def pause(self) -> None:
        """PAUSE: the transactions in flight finish (they are waited for), new ones are held."""
        self.admin("PAUSE")

    def resume(self) -> None:
        self.admin("RESUME")

    def stop(self) -> None:
        if self.process is not None:
            stop_process(self.process, 10)

    def remove(self) -> None:
        self.stop()
        shutil.rmtree(self.folder, ignore_errors=True)


@contextlib.contextmanager
def pgbouncer(server_dsn: str, pool_mode: str = "transaction", pool_size: int = 4,
              max_client_conn: int = 500) -> Iterator[Pgbouncer]:
    """A started pgbouncer in `pool_mode` for every database of the server behind `server_dsn`;
    stopped and its files removed after."""
    bouncer = Pgbouncer(server_dsn, pool_mode, pool_size, max_client_conn)
    try:
        bouncer.start()
        yield bouncer
    finally:
        bouncer.remove()


def _listening(port: int) -> bool:
    with socket.socket() as sock:
        sock.settimeout(0.2)
        return sock.connect_ex(("127.0.0.1", port)) == 0
