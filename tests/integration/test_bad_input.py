"""Bad input of every kind: a clear error naming what is wrong, and no data written or lost.

The matrix extends tests/integration/test_cli.py (which already covers a few `claimsched apply`
cases): schedules, time zones, numeric bounds, hostile job names, malformed YAML, wrong DSNs,
schemas older or newer than the code, and handlers that raise, hang or return garbage
(schedules, zones and settings refused before any database: tests/unit/test_bad_specs.py).
Several cases were agent bugs when this matrix was written (a NUL byte or a lone surrogate in
a handler's error, an unprintable exception, a returned awaitable, booleans taken as seconds,
non-UTF-8 files, the CLI writing into a schema of another version); they are fixed and stay here.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest

from claimsched import (
    Agent,
    AuthenticationFailed,
    DatabaseUnavailable,
    InvalidSpec,
    LeaseLost,
    Run,
    SchemaMismatch,
)
from claimsched.cli import main
from claimsched.db import AGENT_API, SCHEMA_VERSION, Store
from claimsched.schedule.specs import JobSpec, job_spec
from tests.helpers.polling import wait_for

from .support import runs, sql
from .test_security import PasswordRole, password_role  # noqa: F401 - a fixture

FAST = {"housekeeping_seconds": 0.3, "retry_backoff_seconds": 0.1, "shutdown_grace_seconds": 1}


def cli(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def one_clear_line(code: int, err: str, *fragments: str) -> None:
    assert code == 1, err
    assert err.startswith("claimsched: error: ") and err.count("\n") == 1, err
    assert "Traceback" not in err
    for fragment in fragments:
        assert fragment in err, err


def nothing_written(dsn: str) -> None:
    counts = sql(
        dsn,
        "SELECT (SELECT count(*) FROM job_schedule), (SELECT count(*) FROM job_runs), "
        "(SELECT count(*) FROM job_effects), (SELECT count(*) FROM agents)",
    )
    assert counts == [(0, 0, 0, 0)], counts


def tables_intact(dsn: str) -> None:
    names = {
        r[0] for r in sql(dsn, "SELECT tablename FROM pg_tables WHERE schemaname = 'claimsched'")
    }
    assert {"job_schedule", "job_runs", "job_effects", "agents", "schema_version"} <= names


def claimschedule(spec: str, name: str = "bad") -> str:
    return (
        "apiVersion: claimsched.io/v1alpha1\nkind: ClaimSchedule\n"
        f"metadata: {{name: {name}}}\nspec: {spec}\n"
    )


GOOD = claimschedule("{schedule: '@daily'}", "good")


# -- schedules: cron fields, descriptors, @every (refused without a database: tests/unit) ------


@pytest.mark.parametrize(
    ("schedule", "message"),
    [
        ("*/0 * * * *", "step of 0"),
        ("* 24 * * *", "hour field"),
        ("@every 5x", "'5x'"),
        ("0 0 31 2 *", "never fires"),
        ("@fortnightly", "unknown descriptor"),
    ],
)
def test_apply_refuses_a_malformed_schedule_and_writes_none_of_the_file(
    dsn: str, tmp_path: Path, capsys: pytest.CaptureFixture[str], schedule: str, message: str
) -> None:
    path = tmp_path / "s.yaml"
    path.write_text(GOOD + "---\n" + claimschedule(f"{{schedule: '{schedule}'}}"))
    code, _, err = cli(capsys, "apply", str(path), "--dsn", dsn)
    one_clear_line(code, err, "document 2", message)
    nothing_written(dsn)


# -- numeric bounds: lease, heartbeat, attempts, windows -------------------------------------------


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("{schedule: '@daily', leaseSeconds: 86401}", "lease_seconds"),
        ("{schedule: '@daily', heartbeatSeconds: 0}", "heartbeat_seconds"),
        ("{schedule: '@daily', maxAttempts: 0}", "max_attempts"),
        ("{schedule: '@daily', maxAttempts: 1000}", "max_attempts"),
        ("{schedule: '@daily', leaseSeconds: 1e309}", "lease_seconds"),
        ("{schedule: '@daily', leaseSeconds: .nan}", "lease_seconds"),
        ("{schedule: '@daily', catchUpWindowSeconds: -5}", "catch_up_window_seconds"),
        ("{schedule: '@daily', concurrencyPolicy: Sometimes}", "concurrency_policy"),
        ("{schedule: '@daily', timeZone: 5}", "time_zone"),
        ("{schedule: 42}", "schedule"),
    ],
)
def test_apply_refuses_out_of_range_values(
    dsn: str, tmp_path: Path, capsys: pytest.CaptureFixture[str], spec: str, message: str
) -> None:
    path = tmp_path / "s.yaml"
    path.write_text(GOOD + "---\n" + claimschedule(spec))
    code, _, err = cli(capsys, "apply", str(path), "--dsn", dsn)
    one_clear_line(code, err, message)
    nothing_written(dsn)


def test_a_boolean_is_not_a_number_of_seconds(
    dsn: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "s.yaml"
    path.write_text(
        claimschedule("{schedule: '@daily', leaseSeconds: true, heartbeatSeconds: true}")
    )
    code, _, err = cli(capsys, "apply", str(path), "--dsn", dsn)
    one_clear_line(code, err, "lease_seconds")
    nothing_written(dsn)


class Unvalidated(JobSpec):
    """A JobSpec that skips its checks, as code writing rows by other means would."""

    def __post_init__(self) -> None:
        pass


@pytest.mark.parametrize(
    "fields",
    [
        {"lease_seconds": 0},
        {"heartbeat_seconds": 50, "lease_seconds": 60},
        {"max_attempts": 0},
        {"catch_up_policy": "Some"},
        {"concurrency_policy": "Never"},
        {"job_name": "x'; DROP TABLE job_runs; --"},
        {"job_name": "名前"},
    ],
)
def test_the_database_refuses_what_validation_was_bypassed_for(
    store: Store, fields: dict[str, Any]
) -> None:
    """Defence in depth: the table's CHECK constraints hold even for code that skips validation."""
    spec = Unvalidated(**{**job_spec(job_name="j", schedule="@daily").row(), **fields})
    with pytest.raises(InvalidSpec, match="the database rejected the value"):
        store.schedules.upsert(spec)
    nothing_written(store.dsn)
    tables_intact(store.dsn)


# -- hostile job names: quotes, semicolons, unicode ------------------------------------------------

HOSTILE_NAMES = [
    "x'; DROP TABLE job_runs; --",
    "Robert'); DROP TABLE job_schedule;--",
    'a"b',
    "a;b",
    "j' OR '1'='1",
    "j\\' OR 1=1 --",
    "$$; DROP SCHEMA claimsched CASCADE; $$",
    "名前",
    "ünïcødé",
    "\uff46\uff55\uff4c\uff4c",  # fullwidth "full"
    "a\u202eb",
    "a\x00b",
    "a\nb",
    "a b",
    "-lead",
    "trail-",
    "..",
    "x" * 129,
    "",
]


@pytest.mark.parametrize("name", HOSTILE_NAMES)
def test_a_hostile_job_name_is_refused_everywhere_and_breaks_nothing(
    dsn: str, tmp_path: Path, capsys: pytest.CaptureFixture[str], name: str
) -> None:
    with pytest.raises(InvalidSpec, match="invalid job name"):
        job_spec(job_name=name, schedule="@daily")
    with pytest.raises(InvalidSpec, match="invalid job name"):
        Agent(dsn).job(name)
    if "\x00" not in name and name:  # YAML cannot carry NUL; an empty jobName means "use
        # metadata.name", which is valid
        path = tmp_path / "s.yaml"
        path.write_text(
            GOOD + "---\n" + claimschedule(f"{{schedule: '@daily', jobName: {_yaml_string(name)}}}")
        )
        code, _, err = cli(capsys, "apply", str(path), "--dsn", dsn)
        one_clear_line(code, err, "invalid job name")
    nothing_written(dsn)
    tables_intact(dsn)


def _yaml_string(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'


@pytest.mark.parametrize("name", [n for n in HOSTILE_NAMES if "\x00" not in n and n])
def test_hostile_job_names_in_trigger_backfill_and_runs_are_just_unknown_jobs(
    dsn: str, tmp_path: Path, capsys: pytest.CaptureFixture[str], name: str
) -> None:
    path = tmp_path / "s.yaml"
    path.write_text(GOOD)
    assert cli(capsys, "apply", str(path), "--dsn", dsn)[0] == 0
    before = sql(dsn, "SELECT job_name, schedule, updated_at FROM job_schedule")
    code, _, err = cli(capsys, "trigger", "--dsn", dsn, "--", name)  # "--": "-lead" is a name
    one_clear_line(code, err, "no schedule for job")
    code, _, err = cli(
        capsys, "backfill", "--dsn", dsn, "--", name, "2026-01-01T00:00:00Z", "2026-01-02T00:00:00Z"
    )
    one_clear_line(code, err, "no schedule for job")
    code, out, _ = cli(capsys, "runs", f"--job={name}", "--dsn", dsn, "--json")
    assert code == 0 and out.strip() == "[]"
    assert sql(dsn, "SELECT job_name, schedule, updated_at FROM job_schedule") == before
    assert sql(dsn, "SELECT count(*) FROM job_runs") == [(0,)]
    tables_intact(dsn)


# -- malformed YAML and files ----------------------------------------------------------------------

BAD_DOCUMENTS: list[tuple[str, bytes, str]] = [
    ("tabs", b"kind: ClaimSchedule\nmetadata:\n\tname: x\n", "not valid YAML"),
    ("unclosed flow", b"kind: ClaimSchedule\nspec: {schedule: '@daily'\n", "not valid YAML"),
    ("unclosed quote", b"kind: ClaimSchedule\nmetadata: {name: 'x}\n", "not valid YAML"),
    ("python tag", b"!!python/object/apply:os.system ['true']\n", "not valid YAML"),
    ("undefined alias", b"a: *missing\n", "not valid YAML"),
    ("a list", b"- kind: ClaimSchedule\n", "must be a mapping"),
    ("a scalar", b"just text\n", "must be a mapping"),
    (
        "wrong kind",
        b"kind: CronJob\nmetadata: {name: x}\nspec: {schedule: '@daily'}\n",
        "expected kind ClaimSchedule",
    ),
    ("no spec", b"kind: ClaimSchedule\nmetadata: {name: x}\n", "metadata and spec mappings"),
    (
        "spec is a list",
        b"kind: ClaimSchedule\nmetadata: {name: x}\nspec: [1]\n",
        "metadata and spec mappings",
    ),
    (
        "no name",
        b"kind: ClaimSchedule\nmetadata: {}\nspec: {schedule: '@daily'}\n",
        "metadata.name or spec.jobName",
    ),
    (
        "no schedule",
        b"kind: ClaimSchedule\nmetadata: {name: x}\nspec: {timeZone: UTC}\n",
        "schedule",
    ),
    ("same name twice", GOOD.encode(), "the same job name appears twice"),
]


@pytest.mark.parametrize(
    ("document", "message"), [c[1:] for c in BAD_DOCUMENTS], ids=[c[0] for c in BAD_DOCUMENTS]
)
def test_apply_refuses_a_malformed_document_and_writes_none_of_the_file(
    dsn: str, tmp_path: Path, capsys: pytest.CaptureFixture[str], document: bytes, message: str
) -> None:
    path = tmp_path / "s.yaml"
    path.write_bytes(GOOD.encode() + b"---\n" + document)
    code, _, err = cli(capsys, "apply", str(path), "--dsn", dsn)
    one_clear_line(code, err, message)
    nothing_written(dsn)


@pytest.mark.parametrize("content", [b"", b"# nothing\n---\n# here\n", b"---\n---\n"])
def test_apply_refuses_a_file_without_documents(
    dsn: str, tmp_path: Path, capsys: pytest.CaptureFixture[str], content: bytes
) -> None:
    path = tmp_path / "s.yaml"
    path.write_bytes(content)
    code, _, err = cli(capsys, "apply", str(path), "--dsn", dsn)
    one_clear_line(code, err, "no ClaimSchedule documents")
    nothing_written(dsn)


def test_apply_refuses_a_file_that_is_not_utf8(
    dsn: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "s.yaml"
    path.write_bytes(GOOD.encode() + b"---\nkind: ClaimSchedule\nmetadata: {name: \xff\xfe}\n")
    code, _, err = cli(capsys, "apply", str(path), "--dsn", dsn)
    one_clear_line(code, err, "UTF-8")
    nothing_written(dsn)


def test_apply_refuses_a_missing_file_or_a_directory(
    dsn: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, err = cli(capsys, "apply", str(tmp_path / "nope.yaml"), "--dsn", dsn)
    one_clear_line(code, err, "cannot read", "nope.yaml")
    code, _, err = cli(capsys, "apply", str(tmp_path), "--dsn", dsn)
    one_clear_line(code, err, "cannot read")
    nothing_written(dsn)


# -- wrong DSNs: host, port, password, database ----------------------------------------------------


def test_apply_to_a_wrong_host_port_or_database_is_one_line_without_the_password(
    server_dsn: str, dsn: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    info = psycopg.conninfo.conninfo_to_dict(server_dsn)
    host, port = info["host"], info["port"]
    path = tmp_path / "s.yaml"
    path.write_text(GOOD)
    cases = [
        (f"postgresql://app:Sup3rSecret@no-such-host.invalid:{port}/x", "cannot reach"),
        ("postgresql://app:Sup3rSecret@127.0.0.1:1/x", "cannot reach"),
        (f"postgresql://postgres:Sup3rSecret@{host}:{port}/no_such_db", "does not exist"),
        ("host=127.0.0.1 port=99999 password=Sup3rSecret", "port"),
        ("not a dsn password=Sup3rSecret", "the DSN is malformed"),
    ]
    for bad, message in cases:
        code, out, err = cli(capsys, "apply", str(path), "--dsn", bad, "--connect-timeout", "2")
        one_clear_line(code, err, message)
        assert "Sup3rSecret" not in err + out
    nothing_written(dsn)


def test_an_agent_with_a_wrong_dsn_refuses_to_start_and_says_why(
    server_dsn: str,
    password_role: PasswordRole,  # noqa: F811 - the fixture
    caplog: pytest.LogCaptureFixture,
) -> None:
    info = psycopg.conninfo.conninfo_to_dict(server_dsn)
    host, port = info["host"], info["port"]
    role = password_role
    cases = [
        (
            f"postgresql://{role.user}:wrong-{role.password}@{host}:{port}/postgres",
            AuthenticationFailed,
            "refused the login",
        ),
        (
            f"postgresql://{role.user}:{role.password}@{host}:{port}/no_such_db",
            DatabaseUnavailable,
            "does not exist",
        ),
        (
            f"postgresql://{role.user}:{role.password}@no-such-host.invalid:{port}/postgres",
            DatabaseUnavailable,
            "cannot reach",
        ),
        (
            f"postgresql://{role.user}:{role.password}@127.0.0.1:1/postgres",
            DatabaseUnavailable,
            "cannot reach",
        ),
    ]
    for bad, error, message in cases:
        # A database that is away is tried again for start_timeout_seconds (here 1 s, each try
        # logged); a refused password or a missing database is said at once, never retried.
        away = message == "cannot reach"
        agent = Agent(bad, agent_id="wrong-dsn", start_timeout_seconds=1 if away else 60)
        agent.job("j", schedule="@daily")(lambda run: None)
        caplog.clear()
        with (
            caplog.at_level(logging.WARNING, logger="claimsched"),
            pytest.raises(error, match=message) as caught,
        ):
            agent.start()
        assert role.password not in str(caught.value) + caplog.text
        assert "\n" not in str(caught.value)
        assert ("trying again" in caplog.text) == away, (bad, caplog.text)
    assert sql(
        server_dsn, "SELECT count(*) FROM pg_stat_activity WHERE usename = %s", [role.user]
    ) == [(0,)], "no connection left behind"


# -- schemas older or newer than the code ----------------------------------------------------------


@pytest.fixture
def newer_schema(dsn: str) -> str:
    sql(dsn, "INSERT INTO schema_version VALUES (%s)", [SCHEMA_VERSION + 1])
    return dsn


@pytest.fixture
def code_is_newer(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """This code expects a schema one version ahead of what the database has."""
    import claimsched.db
    import claimsched.db.migrations

    monkeypatch.setattr(claimsched.db.migrations, "SCHEMA_VERSION", SCHEMA_VERSION + 1)
    monkeypatch.setattr(claimsched.db, "SCHEMA_VERSION", SCHEMA_VERSION + 1)
    yield


def test_an_agent_refuses_a_newer_schema_that_no_longer_serves_its_api_even_when_it_may_migrate(
    newer_schema: str,
) -> None:
    """A newer schema that still serves the agent's API is accepted (tests/upgrade); one that
    dropped it is refused, and migrating cannot help."""
    sql(newer_schema, "DELETE FROM agent_apis WHERE api = %s", [AGENT_API])
    agent = Agent(newer_schema, agent_id="old-code", migrate=True)
    agent.job("j", schedule="@every 1s")(lambda run: None)
    with pytest.raises(SchemaMismatch, match=r"newer than this claimsched .* no longer serves"):
        agent.start()
    nothing_written(newer_schema)


def test_an_agent_refuses_an_older_schema_it_may_not_migrate(dsn: str, code_is_newer: None) -> None:
    agent = Agent(dsn, agent_id="new-code", migrate=False)
    agent.job("j", schedule="@every 1s")(lambda run: None)
    with pytest.raises(SchemaMismatch, match="run `claimsched migrate`"):
        agent.start()
    nothing_written(dsn)


def test_migrate_refuses_a_newer_schema(
    newer_schema: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, err = cli(capsys, "migrate", "--dsn", newer_schema)
    one_clear_line(code, err, "newer than this claimsched")
    assert sql(newer_schema, "SELECT max(version) FROM schema_version") == [(SCHEMA_VERSION + 1,)]


def test_apply_and_trigger_refuse_a_newer_schema(
    newer_schema: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "s.yaml"
    path.write_text(GOOD)
    code, _, err = cli(capsys, "apply", str(path), "--dsn", newer_schema)
    written = sql(newer_schema, "SELECT count(*) FROM job_schedule")
    one_clear_line(code, err, "newer than this claimsched")
    assert written == [(0,)]


def test_apply_refuses_an_older_schema(
    dsn: str, code_is_newer: None, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "s.yaml"
    path.write_text(GOOD)
    code, _, err = cli(capsys, "apply", str(path), "--dsn", dsn)
    written = sql(dsn, "SELECT count(*) FROM job_schedule")
    one_clear_line(code, err, "claimsched migrate")
    assert written == [(0,)]


# -- handlers that raise, hang past max_runtime, or return garbage ---------------------------------


@pytest.fixture
def agent(dsn: str) -> Iterator[Agent]:
    made = Agent(dsn, agent_id="a", **FAST)
    yield made
    made.stop()


def _statuses(dsn: str, job: str) -> list[tuple[str, str | None]]:
    return [(r["status"], r["error"]) for r in runs(dsn, job)]


def _keeps_working(dsn: str, agent: Agent) -> None:
    """The agent is still alive and its well-behaved job still completes runs."""
    before = sum(1 for s, _ in _statuses(dsn, "good") if s == "done")
    wait_for(
        lambda: sum(1 for s, _ in _statuses(dsn, "good") if s == "done") >= before + 2,
        timeout=10,
        what="the well-behaved job to keep running",
    )
    assert agent.fatal is None


class BrokenStr(Exception):
    def __str__(self) -> str:
        raise RuntimeError("__str__ is broken too")


RAISES: list[tuple[str, Any, str]] = [
    ("value error", ValueError("the upstream service is down"), "ValueError: the upstream"),
    ("system exit", SystemExit(3), "SystemExit: 3"),
    ("keyboard interrupt", KeyboardInterrupt(), "KeyboardInterrupt"),
    ("huge message", ValueError("x" * 5_000_000), "ValueError: xxx"),
    ("unicode message", ValueError("płatność nie powiodła się ✗ 名前"), "płatność"),
    ("lease lost", LeaseLost("fenced"), "LeaseLost: fenced"),
]


def test_handlers_that_raise_fail_their_own_runs_and_nothing_else(dsn: str, agent: Agent) -> None:
    for kind, exc, _ in RAISES:

        def bad(run: Run, exc: BaseException = exc) -> None:
            raise exc

        job = kind.replace(" ", "-")
        agent.job(job, schedule="@every 1s", lease_seconds=3, heartbeat_seconds=1)(bad)
    agent.job("good", schedule="@every 1s")(lambda run: None)
    agent.start()
    for kind, _, message in RAISES:
        job = kind.replace(" ", "-")
        wait_for(
            lambda job=job: any(s == "failed" for s, _ in _statuses(dsn, job)),
            what=f"a failed run of {job}",
        )
        errors = [e for s, e in _statuses(dsn, job) if s == "failed"]
        assert all(e and message in e and len(e) <= 2000 for e in errors), (job, errors[:1])
        assert {s for s, _ in _statuses(dsn, job)} <= {"failed", "running", "skipped"}
    _keeps_working(dsn, agent)


def _poisoned_agent_keeps_working(dsn: str, agent: Agent, exc: BaseException) -> None:
    def bad(run: Run) -> None:
        raise exc

    agent.job("bad", schedule="@every 1s", lease_seconds=3, heartbeat_seconds=1)(bad)
    agent.job("good", schedule="@every 1s")(lambda run: None)
    agent.start()
    wait_for(lambda: runs(dsn, "bad"), what="a run of the bad job")
    _keeps_working(dsn, agent)
    wait_for(
        lambda: any(s == "failed" and e for s, e in _statuses(dsn, "bad")),
        timeout=5,
        what="the bad run recorded as failed with its error",
    )


def test_a_handler_error_with_a_nul_byte_does_not_poison_other_completions(
    dsn: str, agent: Agent
) -> None:
    _poisoned_agent_keeps_working(dsn, agent, ValueError("binary \x00 garbage"))


def test_a_handler_error_that_cannot_be_encoded_does_not_kill_the_agent(
    dsn: str, agent: Agent
) -> None:
    _poisoned_agent_keeps_working(
        dsn, agent, OSError(b"file \xff".decode("utf-8", "surrogateescape"))
    )


def test_a_handler_error_that_cannot_be_printed_still_fails_the_run(dsn: str, agent: Agent) -> None:
    _poisoned_agent_keeps_working(dsn, agent, BrokenStr())


def test_a_handler_hanging_past_max_runtime_is_failed_fenced_and_does_not_block_the_job(
    dsn: str, agent: Agent
) -> None:
    release = threading.Event()
    lock = threading.Lock()
    hung: list[Any] = []
    outcome: list[str] = []

    @agent.job(
        "hang",
        schedule="@every 1s",
        max_runtime_seconds=1,
        concurrency_policy="Forbid",
        lease_seconds=30,
        heartbeat_seconds=1,
    )
    def hang(run: Run) -> None:
        with lock:
            first = not hung
            if first:
                hung.append(run.fire_time)
        if not first:
            return
        release.wait(15)  # ignores run.lost, like a handler stuck in a call without a timeout
        try:
            run.effect("late")
            outcome.append("effect went through")
        except LeaseLost:
            outcome.append("refused")

    agent.job("good", schedule="@every 1s")(lambda run: None)
    agent.start()
    try:
        wait_for(lambda: hung, what="the first run")

        def first_run() -> dict[str, Any]:
            return next(r for r in runs(dsn, "hang") if r["fire_time"] == hung[0])

        wait_for(
            lambda: first_run()["status"] == "failed", timeout=10, what="the hung run to be failed"
        )
        assert "max_runtime of 1 s exceeded" in first_run()["error"]
        wait_for(
            lambda: any(r["status"] == "done" for r in runs(dsn, "hang")),
            timeout=10,
            what="later occurrences of the job to run despite the hung one",
        )
        _keeps_working(dsn, agent)
    finally:
        release.set()
    wait_for(lambda: outcome, what="the hung handler to wake up")
    assert outcome == ["refused"]
    assert sql(dsn, "SELECT count(*) FROM job_effects WHERE entity = 'late'") == [(0,)]


GARBAGE: list[tuple[str, Any]] = [
    ("int", 42),
    ("dict", {"status": "ok"}),
    ("huge-list", ["a"] * 100_000),
    ("bytes", b"\x00\xff"),
    ("nan", float("nan")),
    ("a-class", Exception),
    ("an-iterator", iter([1])),
]


def test_handlers_returning_garbage_are_done_with_a_warning(
    dsn: str, agent: Agent, caplog: pytest.LogCaptureFixture
) -> None:
    for job, garbage in GARBAGE:
        agent.job(job, schedule="@every 1s")(lambda run, garbage=garbage: garbage)
    agent.job("good", schedule="@every 1s")(lambda run: None)
    agent.start()
    for job, _ in GARBAGE:
        wait_for(lambda job=job: ("done", None) in _statuses(dsn, job), what=f"{job} done")
        assert {s for s, _ in _statuses(dsn, job)} <= {"done", "running"}
    _keeps_working(dsn, agent)
    assert "return values are ignored" in caplog.text


class Work:
    """An awaitable that is not a coroutine (no 'never awaited' warning when dropped)."""

    def __init__(self, ran: threading.Event) -> None:
        self.ran = ran

    def __await__(self) -> Any:
        self.ran.set()
        return iter(())


def test_a_handler_returning_an_awaitable_is_awaited_or_failed(dsn: str, agent: Agent) -> None:
    ran = threading.Event()
    agent.job("bad", schedule="@every 1s")(lambda run: Work(ran))
    agent.start()
    wait_for(
        lambda: runs(dsn, "bad") and runs(dsn, "bad")[0]["status"] != "running",
        what="the first run to end",
    )
    # The awaitable is awaited before the run's end is recorded: no wait past that end.
    assert ran.is_set() or runs(dsn, "bad")[0]["status"] == "failed"
