"""A throwaway PostgreSQL server from the local binaries, for the demo, tests and benchmarks.

Works as root (initdb and pg_ctl then run as the `postgres` OS user) and as a normal user.
"""

from __future__ import annotations

import contextlib
import glob
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import ConfigurationError


def find_bindir() -> Path:
    """Where initdb, pg_ctl and postgres live; PG_BINDIR overrides the search."""
    candidates = [os.environ.get("PG_BINDIR", "")]
    candidates += sorted(glob.glob("/usr/lib/postgresql/*/bin"), reverse=True)
    candidates += [str(Path(p).parent) for p in [shutil.which("pg_ctl") or ""] if p]
    for folder in candidates:
        if folder and (Path(folder) / "initdb").exists() and (Path(folder) / "pg_ctl").exists():
            return Path(folder)
    try:
        from pgserver._commands import POSTGRES_BIN_PATH

        return Path(POSTGRES_BIN_PATH)
    except ImportError:
        pass
    raise ConfigurationError(
        "no PostgreSQL server binaries found: install the `postgresql` package "
        "(apt-get install postgresql), pip install 'claimsched[embedded]', or pass --dsn"
    )


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextlib.contextmanager
def reserved_ports(count: int) -> Iterator[list[int]]:
    """`count` distinct free localhost ports, held until the block ends: separate free_port()
    calls may answer the same port twice, and whatever binds port 0 inside the block (a proxy)
    cannot be given one of them."""
    with contextlib.ExitStack() as stack:
        socks = [stack.enter_context(socket.socket()) for _ in range(count)]
        for sock in socks:
            sock.bind(("127.0.0.1", 0))
        yield [int(sock.getsockname()[1]) for sock in socks]


@dataclass
class TemporaryPostgres:
    """initdb into a temp dir, start on a free localhost port; stop() removes everything."""

    port: int = field(default_factory=free_port)
    settings: dict[str, str] = field(default_factory=dict)
    bindir: Path = field(default_factory=find_bindir)
    root: Path = field(init=False)

    def __post_init__(self) -> None:
        self.root = Path(tempfile.mkdtemp(prefix="claimsched-pg-"))
        self._user: dict[str, Any] = {}
        if os.geteuid() == 0:
            try:
                account = pwd.getpwnam("postgres")
            except KeyError as exc:
                raise ConfigurationError(
                    "running as root needs the `postgres` OS user (install the postgresql package)"
                ) from exc
            os.chown(self.root, account.pw_uid, account.pw_gid)
            self._user = {"user": account.pw_uid, "group": account.pw_gid, "extra_groups": []}
        self.data = self.root / "data"
        self.log = self.root / "postgres.log"

    @property
    def dsn(self) -> str:
        return self.dsn_for("postgres")

    def dsn_for(self, database: str, user: str = "postgres") -> str:
        return f"postgresql://{user}@127.0.0.1:{self.port}/{database}"

    def _run(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        env = {
            k: v
            for k, v in os.environ.items()
            if not k.startswith(("PG", "LD_PRELOAD", "FAKETIME"))
        }
        env["LC_ALL"] = "C.UTF-8"
        return subprocess.run(
            [str(self.bindir / args[0]), *args[1:]],
            check=check,
            capture_output=True,
            text=True,
            env=env,
            cwd=self.root,
            **self._user,
        )

    def init(self) -> TemporaryPostgres:
        try:
            self._run(
                "initdb",
                "-D",
                str(self.data),
                "--auth=trust",
                "--no-sync",
                "-E",
                "UTF8",
                "--locale=C.UTF-8",
                "-U",
                "postgres",
            )
        except subprocess.CalledProcessError as exc:
            raise ConfigurationError(f"initdb failed: {exc.stderr.strip()[-500:]}") from exc
        conf = {
            "listen_addresses": "'127.0.0.1'",
            "unix_socket_directories": f"'{self.root}'",
            "fsync": "off",
            "synchronous_commit": "off",
            "full_page_writes": "off",
            "max_connections": "300",
            **self.settings,
        }
        with open(self.data / "postgresql.conf", "a") as handle:
            handle.writelines(f"{key} = {value}\n" for key, value in conf.items())
        return self

    def start(self) -> TemporaryPostgres:
        if not self.data.exists():
            self.init()
        result = self._run(
            "pg_ctl",
            "-D",
            str(self.data),
            "-l",
            str(self.log),
            "-o",
            f"-p {self.port}",
            "-w",
            "-t",
            "60",
            "start",
            check=False,
        )
        if result.returncode != 0:
            raise ConfigurationError(f"postgres did not start: {self.log_tail()}")
        return self

    def stop(self, mode: str = "fast") -> None:
        if self.data.exists():
            self._run("pg_ctl", "-D", str(self.data), "-m", mode, "-w", "stop", check=False)

    def restart(self, mode: str = "fast") -> None:
        self.stop(mode)
        self.start()

    def destroy(self) -> None:
        self.stop("immediate")
        shutil.rmtree(self.root, ignore_errors=True)

    def log_tail(self, lines: int = 20) -> str:
        try:
            return "\n".join(self.log.read_text().splitlines()[-lines:])
        except OSError:
            return "(no log)"

    def __enter__(self) -> TemporaryPostgres:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.destroy()
