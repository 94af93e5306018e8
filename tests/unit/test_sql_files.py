"""The function files of claimsched.db's sql/functions/: one function a file, none a template
(the schema comes from the search_path), each listed once in index.sql, in an order where a
function comes after those it calls."""

from __future__ import annotations

import re
from pathlib import Path

from claimsched.db.queries import SPEC_LISTS, function_files

FOLDER = Path(__file__).resolve().parents[2] / "agent" / "claimsched" / "db" / "sql"
CREATED = re.compile(r"^CREATE OR REPLACE FUNCTION (\w+)\(", re.MULTILINE)


def test_index_lists_every_function_file_once() -> None:
    listed = [name for name, _ in function_files()]
    assert len(listed) == len(set(listed))
    on_disk = {path.name for path in (FOLDER / "functions").glob("*.sql")} - {"index.sql"}
    assert set(listed) == on_disk
    assert listed[0] == "_begin.sql" and listed[-2:] == ["_paths.sql", "_end.sql"]
    assert "count_schedule_change.sql" in listed  # trigger functions too


def test_each_function_file_creates_the_function_it_is_named_after() -> None:
    for name, text in function_files():
        if name.startswith("_"):
            assert not CREATED.findall(text), name
            continue
        assert CREATED.findall(text) == [name.removesuffix(".sql")], name


def test_no_file_is_a_template_and_every_function_keeps_the_path_it_was_made_with() -> None:
    for path in [*FOLDER.glob("functions/*.sql"), FOLDER / "policies.sql"]:
        text = re.sub(r"--[^\n]*", "", path.read_text())
        assert not re.findall(r"\{[a-z_]*\}", text), path.name
        if path.name != "_paths.sql":  # the one place that writes the path functions keep
            assert "search_path = " not in text, path.name
    for name, text in function_files():
        if "SECURITY DEFINER" in text:
            assert "SET search_path FROM CURRENT" in text, name


def test_functions_are_created_after_the_functions_they_call() -> None:
    order = [name.removesuffix(".sql") for name, _ in function_files()]
    for position, (name, text) in enumerate(function_files()):
        body = re.sub(r"--[^\n]*", "", text)
        for called in set(re.findall(r"\b(cs_\w+)\(", body)) - {name.removesuffix(".sql")}:
            if called in order:
                assert order.index(called) < position, f"{name} calls {called} before it"


def test_the_upsert_writes_exactly_the_columns_of_a_jobspec() -> None:
    """cs_upsert_schedule spells out JobSpec's columns (claimsched.schedule.specs.SPEC_COLUMNS):
    a field added to JobSpec fails here until the function writes it too."""
    text = (FOLDER / "functions" / "cs_upsert_schedule.sql").read_text()
    for key in ("spec_columns", "spec_fields", "spec_upserted", "spec_current"):
        assert SPEC_LISTS[key].as_string(None) in text, key


def test_the_shared_predicates_are_written_once() -> None:
    """Whether an agent is alive (agent_alive.sql) and whether a run wants an owner
    (run_wants_owner.sql) are defined once; every statement calls them."""
    texts = {path.name: re.sub(r"--[^\n]*", "", path.read_text())
             for path in FOLDER.rglob("*.sql")
             if "migrations" not in path.parts and path.name != "schema.sql"}  # a snapshot
    for name, text in texts.items():
        if name != "agent_alive.sql":
            assert not re.search(r"\.?last_seen \+ make_interval", text), name
        if name != "run_wants_owner.sql":
            assert not re.search(r"status = 'failed' AND \w*\.?retry_at <= now\(\)", text), name
