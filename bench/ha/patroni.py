"""A real HA PostgreSQL for failover tests: one etcd and a two-node Patroni cluster (PG 15).

`patroni_cluster()` starts everything on free localhost ports and tears it all down afterwards,
whatever happened (no process is left behind: Patroni, its postmasters and their children, etcd).
Every member's replication goes through its own `Blackhole` proxy, so a test can hold the
primary's WAL back from the standby (a lagging asynchronous standby) without touching Patroni.
As root, Patroni runs as the `postgres` OS user from its own venv (scripts/bootstrap.sh makes
it); a missing binary raises `MissingBinaries` saying what to install (a test fails, never skips).
"""

from __future__ import annotations

import contextlib
import json
import os
import pwd
import shutil
import signal
import subprocess
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from claimsched.tools.postgres import reserved_ports
from claimsched.tools.processes import stop_processes

from .blackhole import Blackhole

PG_BINDIR = Path(os.environ.get("CLAIMSCHED_HA_PG_BINDIR", "/usr/lib/postgresql/15/bin"))
PATRONI_VENV = Path(os.environ.get("CLAIMSCHED_PATRONI_VENV", "/opt/claimsched-patroni"))
SCOPE = "claimsched-ha"
# Patroni's floor: ttl >= 20, loop_wait + 2 * retry_timeout <= ttl; a hard-killed leader's
# standby is promoted about ttl seconds later.
DCS = {"ttl": 20, "loop_wait": 1, "retry_timeout": 3}


class MissingBinaries(RuntimeError):
    """etcd, Patroni or the PG 15 server is not installed."""


def wait_for(
    probe: Callable[[], object], what: str, *, timeout: float, log: Path | Callable[[], str]
) -> None:
    """Poll `probe` until it answers something truthy; at the deadline raise TimeoutError naming
    `what`, with the tail of `log` (a file, or a function returning the text)."""
    deadline = time.monotonic() + timeout
    while not probe():
        if time.monotonic() > deadline:
            text = log.read_text(errors="replace") if isinstance(log, Path) else log()
            raise TimeoutError(f"timed out after {timeout}s waiting for {what}\n{text[-6000:]}")
        time.sleep(0.1)


def require_binaries() -> dict[str, Path]:
    """etcd, Patroni and the PG 15 server, or a failure saying how to get them."""
    found = {
        "etcd": Path(shutil.which("etcd") or "/usr/bin/etcd"),
        "patroni": PATRONI_VENV / "bin" / "patroni",
        "postgres": PG_BINDIR / "postgres",
    }
    missing = [f"{name} ({path})" for name, path in found.items() if not os.access(path, os.X_OK)]
    if missing:
        raise MissingBinaries(
            f"a Patroni cluster needs {', '.join(missing)}: run scripts/bootstrap.sh as root "
            "(Debian etcd-server and postgresql, and Patroni in its own venv "
            f"{PATRONI_VENV}), or set CLAIMSCHED_PATRONI_VENV / CLAIMSCHED_HA_PG_BINDIR"
        )
    return found


def _run_as() -> tuple[dict[str, Any], dict[str, str]]:
    """Popen arguments and environment that run a process as `postgres` when we are root."""
    if os.geteuid() != 0:
        return {}, {"PATH": "/usr/bin:/bin", "HOME": os.environ.get("HOME", "/tmp")}
    account = pwd.getpwnam("postgres")
    user = {"user": account.pw_uid, "group": account.pw_gid, "extra_groups": []}
    return user, {"PATH": "/usr/bin:/bin", "HOME": account.pw_dir}


def _chown(path: Path) -> None:
    if os.geteuid() == 0:
        account = pwd.getpwnam("postgres")
        os.chown(path, account.pw_uid, account.pw_gid)


def _http(method: str, url: str, body: dict[str, Any] | None = None) -> tuple[int, Any]:
    data = json.dumps(body).encode() if body is not None else None
    request = urllib.request.Request(url, data=data, method=method)
    request.add_header("Content-Type", "application/json")
    try:
        with urllib.request.urlopen(request, timeout=5) as response:
            status, text = response.status, response.read().decode()
    except urllib.error.HTTPError as exc:
        status, text = exc.code, exc.read().decode()
    except OSError:
        return 0, None
    try:
        return status, json.loads(text)
    except ValueError:
        return status, text


def _children(pid: int) -> list[int]:
    """Processes whose parent is `pid` (postgres children call setsid(): no process group)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        with contextlib.suppress(OSError):
            stat = (entry / "stat").read_text()
            if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
                found.append(int(entry.name))
    return found


def _kill(pid: int) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGKILL)


@dataclass
class Member:
    """One Patroni node: its postgres listens on `pg_port`, others replicate through `proxy`."""

    name: str
    folder: Path
    pg_port: int
    rest_port: int
    proxy: Blackhole
    process: subprocess.Popen[bytes] | None = None

    @property
    def data(self) -> Path:
        return self.folder / "data"

    @property
    def log(self) -> Path:
        return self.folder / "patroni.log"

    @property
    def rest(self) -> str:
        return f"http://127.0.0.1:{self.rest_port}"

    @property
    def dsn(self) -> str:
        """A direct connection to this node, whatever its role."""
        return f"host=127.0.0.1 port={self.pg_port} user=postgres dbname=postgres connect_timeout=3"

    def postmaster(self) -> int | None:
        with contextlib.suppress(OSError, ValueError, IndexError):
            return int((self.data / "postmaster.pid").read_text().split()[0])
        return None

    def kill(self) -> None:
        """SIGKILL Patroni, then its postmaster and every child of it: a machine that died."""
        if self.process is not None:
            _kill(self.process.pid)
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.process.wait(10)
        pid = self.postmaster()
        if pid is not None and Path(f"/proc/{pid}").exists():
            children = _children(pid)
            _kill(pid)
            for child in children + _children(pid):
                _kill(child)


@dataclass
class PatroniCluster:
    """etcd plus two Patroni members; see the module docstring."""

    root: Path
    synchronous: bool = True
    strict: bool = True
    parameters: dict[str, str] = field(default_factory=dict)  # server settings, both nodes
    members: dict[str, Member] = field(default_factory=dict)
    etcd: subprocess.Popen[bytes] | None = None
    started_at: float = 0.0

    def __post_init__(self) -> None:
        self.binaries = require_binaries()
        # Every port distinct, and the proxies bound while they are held: two nodes given one
        # port each see the other's primary as their own postgres and demote forever.
        with reserved_ports(6) as ports:
            self.etcd_port, self.etcd_peer_port = ports[:2]
            for index, name in enumerate(("n1", "n2")):
                folder = self.root / name
                folder.mkdir()
                _chown(folder)
                pg_port, rest_port = ports[2 + 2 * index : 4 + 2 * index]
                self.members[name] = Member(name, folder, pg_port, rest_port, Blackhole(pg_port))

    # -- lifecycle ---------------------------------------------------------------------------

    def start(self, timeout: float = 90.0) -> PatroniCluster:
        self.started_at = time.monotonic()
        self._start_etcd()
        for member in self.members.values():
            self._write_config(member)
            self._start_member(member)
        self.wait_healthy(timeout)
        return self

    def stop(self) -> None:
        """SIGTERM every Patroni (it stops its postgres); hard-kill what is left; then etcd."""
        stop_processes([m.process for m in self.members.values() if m.process is not None], 15)
        for member in self.members.values():
            member.kill()
            member.proxy.close()
        if self.etcd is not None:
            self.etcd.kill()
            self.etcd.wait(10)

    def _start_etcd(self) -> None:
        data = self.root / "etcd"
        client = f"http://127.0.0.1:{self.etcd_port}"
        peer = f"http://127.0.0.1:{self.etcd_peer_port}"
        with open(self.root / "etcd.log", "wb") as log:
            self.etcd = subprocess.Popen(
                [
                    str(self.binaries["etcd"]),
                    *("--name", "e1", "--data-dir", str(data)),
                    *("--listen-client-urls", client, "--advertise-client-urls", client),
                    *("--listen-peer-urls", peer, "--initial-advertise-peer-urls", peer),
                    *("--initial-cluster", f"e1={peer}", "--initial-cluster-state", "new"),
                ],
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        wait_for(
            lambda: _http("GET", f"{client}/health")[0] == 200,
            "etcd to be healthy",
            timeout=20,
            log=self.root / "etcd.log",
        )

    def _write_config(self, member: Member) -> None:
        folder = member.folder
        config = {
            "scope": SCOPE,
            "name": member.name,
            "log": {"level": "INFO"},
            "restapi": {
                "listen": f"127.0.0.1:{member.rest_port}",
                "connect_address": f"127.0.0.1:{member.rest_port}",
            },
            "etcd3": {"hosts": [f"127.0.0.1:{self.etcd_port}"]},
            "bootstrap": {
                "dcs": {
                    **DCS,
                    # a lagging asynchronous standby must still be promoted (it is the point)
                    "maximum_lag_on_failover": 1 << 30,
                    "synchronous_mode": self.synchronous,
                    "synchronous_mode_strict": self.strict,
                    "postgresql": {
                        "use_pg_rewind": True,
                        "use_slots": True,
                        "parameters": {
                            "wal_log_hints": "on",
                            "max_connections": 200,
                            **self.parameters,
                        },
                    },
                },
                "initdb": [{"encoding": "UTF8"}, {"locale": "C.UTF-8"}, "no-sync"],
            },
            "postgresql": {
                "listen": f"127.0.0.1:{member.pg_port}",
                # the other member replicates (and rewinds) through this member's proxy
                "connect_address": f"127.0.0.1:{member.proxy.port}",
                "data_dir": str(member.data),
                "bin_dir": str(PG_BINDIR),
                "pgpass": str(folder / "pgpass"),
                "authentication": {
                    "superuser": {"username": "postgres", "password": "x"},
                    "replication": {"username": "replicator", "password": "y"},
                    "rewind": {"username": "postgres", "password": "x"},
                },
                "parameters": {"unix_socket_directories": str(folder), "fsync": "off"},
                "pg_hba": [
                    "local all all trust",
                    "host all all 127.0.0.1/32 trust",
                    "host replication all 127.0.0.1/32 trust",
                ],
            },
        }
        path = folder / "patroni.yml"
        path.write_text(json.dumps(config, indent=2))  # JSON is YAML
        _chown(path)

    def _start_member(self, member: Member) -> None:
        user, env = _run_as()
        with open(member.log, "ab") as log:
            member.process = subprocess.Popen(
                [str(self.binaries["patroni"]), str(member.folder / "patroni.yml")],
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                cwd=member.folder,
                env={**env, "LANG": "C.UTF-8", "LC_ALL": "C.UTF-8"},
                **user,
            )

    # -- reading the cluster -----------------------------------------------------------------

    def cluster(self) -> dict[str, Any]:
        """GET /cluster from any member that answers: members with role and state."""
        for member in self.members.values():
            status, body = _http("GET", f"{member.rest}/cluster")
            if status == 200 and isinstance(body, dict):
                return body
        return {"members": []}

    def roles(self) -> dict[str, tuple[str, str]]:
        """{member: (role, state)}."""
        return {m["name"]: (m["role"], m["state"]) for m in self.cluster().get("members", [])}

    def leader(self) -> str | None:
        for name, (role, state) in self.roles().items():
            if role == "leader" and state == "running":
                return name
        return None

    def standby(self) -> str:
        leader = self.leader()
        return next(name for name in self.members if name != leader)

    def healthy(self) -> bool:
        """A running leader and the other member streaming (as sync_standby in sync mode)."""
        roles = self.roles()
        if len(roles) != 2 or not self.leader():
            return False
        wanted = "sync_standby" if self.synchronous else "replica"
        return all(
            (role, state) in (("leader", "running"), (wanted, "streaming"))
            for role, state in roles.values()
        )

    def wait_healthy(self, timeout: float = 60.0) -> None:
        wait_for(self.healthy, "a healthy Patroni cluster", timeout=timeout, log=self.logs)

    def logs(self) -> str:
        parts = [f"roles: {self.roles()}"]
        for member in self.members.values():
            with contextlib.suppress(OSError):
                parts.append(f"--- {member.name} ---\n{member.log.read_text()[-2500:]}")
        return "\n".join(parts)

    def dsn(self, dbname: str = "postgres", user: str = "postgres", **extra: str) -> str:
        """Both members, read-write only: libpq tries each until one is the primary."""
        hosts = ",".join("127.0.0.1" for _ in self.members)
        ports = ",".join(str(m.pg_port) for m in self.members.values())
        params = {"connect_timeout": "2", **extra}
        tail = " ".join(f"{key}={value}" for key, value in params.items())
        return (
            f"host={hosts} port={ports} user={user} dbname={dbname} "
            f"target_session_attrs=read-write {tail}"
        )

    # -- operations --------------------------------------------------------------------------

    def switchover(self, timeout: float = 60.0) -> str:
        """A planned switchover to the standby; returns the new leader once it takes writes."""
        old = self.leader()
        assert old is not None, self.logs()
        new = self.standby()
        status, body = _http(
            "POST", f"{self.members[old].rest}/switchover", {"leader": old, "candidate": new}
        )
        assert status == 200, f"switchover refused ({status}): {body}"
        wait_for(lambda: self.leader() == new, f"{new} to lead", timeout=timeout, log=self.logs)
        return new

    def kill_leader(self) -> str:
        """SIGKILL the leader's Patroni, postmaster and children; returns its name."""
        leader = self.leader()
        assert leader is not None, self.logs()
        self.members[leader].kill()
        return leader

    def wait_leader(self, name: str, timeout: float = 60.0) -> None:
        wait_for(lambda: self.leader() == name, f"{name} to lead", timeout=timeout, log=self.logs)

    def rejoin(self, name: str) -> None:
        """Restart a killed member's Patroni on its data dir (it rewinds and follows)."""
        member = self.members[name]
        member.kill()  # nothing of the old incarnation may linger
        (member.data / "postmaster.pid").unlink(missing_ok=True)
        self._start_member(member)

    def set_synchronous(self, synchronous: bool, strict: bool | None = None) -> None:
        """Switch synchronous replication on or off at run time; waits until it took effect."""
        strict = synchronous if strict is None else strict
        leader = self.leader()
        assert leader is not None, self.logs()
        status, body = _http(
            "PATCH",
            f"{self.members[leader].rest}/config",
            {"synchronous_mode": synchronous, "synchronous_mode_strict": strict},
        )
        assert status == 200, f"config change refused ({status}): {body}"
        self.synchronous, self.strict = synchronous, strict
        self.wait_healthy(30)

    def hold_replication(self) -> None:
        """The standby receives no more WAL from the leader (its proxy black-holes it)."""
        leader = self.leader()
        assert leader is not None, self.logs()
        self.members[leader].proxy.blackhole()

    def release_replication(self) -> None:
        for member in self.members.values():
            member.proxy.restore()


@contextlib.contextmanager
def patroni_cluster(
    synchronous: bool = True, strict: bool = True, parameters: dict[str, str] | None = None
) -> Iterator[PatroniCluster]:
    """A started cluster, torn down on exit; its folder is removed unless the block failed."""
    root = Path(tempfile.mkdtemp(prefix="claimsched-ha-"))
    _chown(root)
    cluster = PatroniCluster(root, synchronous, strict, dict(parameters or {}))
    failed = False
    try:
        yield cluster.start()
    except BaseException:
        failed = True
        print(cluster.logs())
        raise
    finally:
        cluster.stop()
        if not failed:
            shutil.rmtree(root, ignore_errors=True)
