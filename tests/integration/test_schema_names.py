"""A schema name means that exact schema, quoted, in the CLI, the agent and the operator alike."""

from __future__ import annotations

import psycopg
import pytest
from pydantic import ValidationError

from claimsched import Agent, ConfigurationError
from claimsched.cli import main
from claimsched.db import Store
from claimsched.schedule.specs import job_spec
from claimsched.settings import AgentSettings
from claimsched_operator.settings import OperatorSettings

from .support import due, past

TABLES = {"schema_version", "job_schedule", "job_runs", "job_effects", "agents"}


def _tables(dsn: str) -> dict[str, set[str]]:
    with psycopg.connect(dsn, autocommit=True) as conn:
        rows = conn.execute(
            "SELECT table_schema, table_name FROM information_schema.tables "
            "WHERE table_name = ANY(%s)",
            [list(TABLES)],
        ).fetchall()
    found: dict[str, set[str]] = {}
    for schema, table in rows:
        found.setdefault(schema, set()).add(table)
    return found


def test_a_mixed_case_schema_holds_every_table_and_public_holds_none(
    empty_dsn: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["migrate", "--dsn", empty_dsn, "--schema", "MySchema"]) == 0
    capsys.readouterr()
    store = Store(empty_dsn, schema="MySchema")
    store.open()
    try:
        store.schedules.upsert(job_spec(job_name="job", schedule="@every 1s"))
        with store.connection() as conn:
            conn.execute("UPDATE job_schedule SET active_since = now() - interval '1 hour'")
        _, results = store.claims.claim("a", due(store, "job", past(2)), 4)
        assert [r.outcome for r in results] == ["claimed"]
        lease = results[0].lease
        assert lease is not None
        assert store.receipts.record("a", lease, "mail:1") == (True, True)
        with psycopg.connect(empty_dsn) as app:  # the app's own transaction and search_path
            assert store.receipts.record("a", lease, "mail:2", app) == (True, True)
    finally:
        store.close()
    assert _tables(empty_dsn) == {"MySchema": TABLES}
    with psycopg.connect(empty_dsn, autocommit=True) as conn:
        counted = conn.execute(
            'SELECT (SELECT count(*) FROM "MySchema".job_runs), '
            '(SELECT count(*) FROM "MySchema".job_effects)'
        ).fetchone()
        assert counted == (1, 2)


def test_the_agent_and_the_operator_take_the_same_names(empty_dsn: str) -> None:
    assert AgentSettings(schema_name="MySchema").schema_name == "MySchema"
    assert OperatorSettings(schema_name="My Schema").schema_name == "My Schema"
    agent = Agent(empty_dsn, agent_id="a", schema_name="My Schema")
    agent.job("job", schedule="@yearly")(lambda run: None)
    agent.start()
    agent.stop()
    assert _tables(empty_dsn) == {"My Schema": TABLES}


@pytest.mark.parametrize(
    ("name", "why"),
    [
        ("", "it is empty"),
        ("x" * 64, "longer than 63 bytes"),
        ("é" * 32, "longer than 63 bytes"),
        ("bad\x00name", "NUL"),
        ("pg_mine", "the prefix pg_ is reserved"),
    ],
)
def test_a_bad_schema_name_is_one_clear_error_everywhere(
    empty_dsn: str, capsys: pytest.CaptureFixture[str], name: str, why: str
) -> None:
    assert main(["migrate", "--dsn", empty_dsn, "--schema", name]) == 1
    out, err = capsys.readouterr()
    assert out == "" and err.count("\n") == 1 and why in err and "Traceback" not in err
    with pytest.raises(ConfigurationError, match=why):
        AgentSettings(schema_name=name)
    with pytest.raises(ConfigurationError, match=why):
        Store(empty_dsn, schema=name)
    with pytest.raises(ValidationError, match=why):
        OperatorSettings(schema_name=name)
    assert _tables(empty_dsn) == {}
