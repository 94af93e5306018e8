"""A private pgbouncer (Debian's 1.18) in front of a test server, in transaction mode by default.

It refuses to run as root, so as root it runs as the `postgres` OS user; its files live in a
temp dir of its own. A missing binary fails the test with what to install, it does not skip.
"""

from __future__ import annotations

import contextlib
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psycopg
import pytest
from psycopg.conninfo import conninfo_to_dict, make_conninfo

from claimsched.tools.postgres import free_port
from claimsched.tools.processes import stop_process
from tests.helpers.polling import wait_for


def _binary() -> str:
    found = shutil.which("pgbouncer") or "/usr/sbin/pgbouncer"
    if not os.access(found, os.X_OK):
        pytest.fail(
            "the pooler tests need pgbouncer: apt-get install pgbouncer (scripts/bootstrap.sh)"
        )
    return found


@dataclass
class Pgbouncer:
    """A running pgbouncer; `dsn_for(dsn)` is `dsn` (a database of the server) through it."""

    server_dsn: str
    folder: Path
    port: int
    process: subprocess.Popen[bytes]

    def dsn_for(self, dsn: str) -> str:
        """The same database and user, reached through the pooler (its `*` fallback entry)."""
        params = conninfo_to_dict(dsn)
        return make_conninfo(
            host="127.0.0.1",
            port=str(self.port),
            dbname=str(params.get("dbname", "postgres")),
            user=str(params.get("user", "postgres")),
        )

    @property
    def admin_dsn(self) -> str:
        return f"host=127.0.0.1 port={self.port} dbname=pgbouncer user=postgres"

    def admin(self, command: str) -> list[tuple[object, ...]]:
        with psycopg.connect(self.admin_dsn, autocommit=True, prepare_threshold=None) as conn:
            cur = conn.execute(command)
            return cur.fetchall() if cur.description else []

    def log(self) -> str:
        with contextlib.suppress(OSError):
            return (self.folder / "pgbouncer.log").read_text(errors="replace")
        return "(no log)"


@contextlib.contextmanager
def pgbouncer(
    server_dsn: str, pool_mode: str = "transaction", pool_size: int = 4
) -> Iterator[Pgbouncer]:
    """pgbouncer in `pool_mode` for every database of the server behind `server_dsn`."""
    binary = _binary()
    server = conninfo_to_dict(server_dsn)
    folder = Path(tempfile.mkdtemp(prefix="claimsched-bouncer-"))
    port = free_port()
    (folder / "userlist.txt").write_text('"postgres" ""\n')
    (folder / "pgbouncer.ini").write_text(
        "[databases]\n"
        f"* = host={server.get('host', '127.0.0.1')} port={server.get('port', 5432)}\n"
        "[pgbouncer]\n"
        "listen_addr = 127.0.0.1\n"
        f"listen_port = {port}\n"
        "unix_socket_dir =\n"
        "auth_type = trust\n"
        f"auth_file = {folder}/userlist.txt\n"
        "admin_users = postgres\n"
        f"pool_mode = {pool_mode}\n"
        f"default_pool_size = {pool_size}\n"
        "max_client_conn = 500\n"
        f"logfile = {folder}/pgbouncer.log\n"
        f"pidfile = {folder}/pgbouncer.pid\n"
    )
    user: dict[str, Any] = {}
    if os.geteuid() == 0:
        account = pwd.getpwnam("postgres")
        for path in (folder, *folder.iterdir()):
            os.chown(path, account.pw_uid, account.pw_gid)
        user = {"user": account.pw_uid, "group": account.pw_gid, "extra_groups": []}
    with open(folder / "stderr.log", "wb") as stderr:
        process = subprocess.Popen(
            [binary, str(folder / "pgbouncer.ini")],
            stdout=subprocess.DEVNULL,
            stderr=stderr,
            start_new_session=True,
            **user,
        )
    bouncer = Pgbouncer(server_dsn, folder, port, process)
    try:
        wait_for(
            lambda: process.poll() is not None or _listening(port),
            "pgbouncer to listen",
            timeout=10,
            log=bouncer.log,
        )
        if process.poll() is not None:
            pytest.fail(f"pgbouncer did not start:\n{(folder / 'stderr.log').read_text()}")
        yield bouncer
    finally:
        stop_process(process, 10)
        shutil.rmtree(folder, ignore_errors=True)


def _listening(port: int) -> bool:
    with socket.socket() as sock:
        sock.settimeout(0.2)
        return sock.connect_ex(("127.0.0.1", port)) == 0
