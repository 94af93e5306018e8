"""Statement variants to try a fix before it is made in the agent (`--variant a,b`).

Each variant rewrites the current text of a named query (sql/queries.sql) and fails loudly if
the text it expects is gone. bench/app.py installs the rewritten queries in the replica before
the agent starts; the agent's code is untouched. Results name the variants they ran with.
"""

from __future__ import annotations

from pathlib import Path

from claimsched.db.queries import queries, query

# name -> (query name, text expected, replacement)
VARIANTS: dict[str, list[tuple[str, str, str]]] = {
    # Insert claims in one global order (not this replica's shuffled preference): concurrent
    # claim statements then wait on each other in one direction only, so they cannot deadlock.
    "ordered-insert": [
        ("claim", "    FROM chosen\n    ORDER BY ord\n",
         "    FROM chosen\n    ORDER BY job_name, fire_time\n"),
    ],
    # Look up the Replace policy by primary key instead of joining the candidates CTE to every
    # inserted row (quadratic in the number of candidates).
    "replace-join": [
        ("claim",
         "    FROM ins JOIN cand ON cand.job_name = ins.job_name"
         " AND cand.fire_time = ins.fire_time\n"
         "    WHERE cand.concurrency_policy = 'Replace' AND ins.status = 'running'\n",
         "    FROM ins JOIN job_schedule rs ON rs.job_name = ins.job_name\n"
         "    WHERE rs.concurrency_policy = 'Replace' AND ins.status = 'running'\n"),
    ],
    # The claim's `db_now` is now(), the statement's start; the agent takes it as the midpoint
    # of the round trip, so a claim that waited D ms on other replicas shifts the replica's idea
    # of the database clock by -D/2 and its next wake-up D/2 late. Report the midpoint instead.
    "clock-midpoint": [
        ("claim", "       now() AS db_now\nFROM (SELECT now()) AS clock\n",
         "       now() + (clock_timestamp() - now()) / 2 AS db_now\n"
         "FROM (SELECT now()) AS clock\n"),
    ],
    # The operator's live-agent count: one scan of agents' handler arrays, grouped by job, joined
    # once, instead of a correlated subquery that scans every agent's whole handlers array for
    # every job (jobs x handler entries).
    "live-agents-join": [
        ("operator_status",
         "       (SELECT count(*) FROM agents a\n"
         "        WHERE a.stopped_at IS NULL\n"
         "          AND a.last_seen + make_interval(secs => a.ttl_seconds) > now()\n"
         "          AND j.job_name = ANY (a.handlers)) AS live_agents,\n",
         "       coalesce(live.agents, 0) AS live_agents,\n"),
        ("operator_status",
         "LEFT JOIN counted c ON c.job_name = j.job_name\n",
         "LEFT JOIN counted c ON c.job_name = j.job_name\n"
         "LEFT JOIN (\n"
         "    SELECT h.job_name, count(DISTINCT a.agent_id) AS agents\n"
         "    FROM agents a, unnest(a.handlers) AS h(job_name)\n"
         "    WHERE a.stopped_at IS NULL\n"
         "      AND a.last_seen + make_interval(secs => a.ttl_seconds) > now()\n"
         "    GROUP BY h.job_name\n"
         ") live ON live.job_name = j.job_name\n"),
    ],
}


def rewrite(names: str) -> dict[str, str]:
    """The rewritten text of every query the comma-separated variants touch."""
    texts: dict[str, str] = {}
    for name in [n.strip() for n in names.split(",") if n.strip()]:
        if name not in VARIANTS:
            raise SystemExit(f"unknown variant {name!r}; known: {', '.join(VARIANTS)}")
        for query_name, old, new in VARIANTS[name]:
            text = texts.get(query_name, query(query_name))
            if old not in text:
                raise SystemExit(f"variant {name}: the {query_name} query changed; update it")
            texts[query_name] = text.replace(old, new)
    return texts


def write(names: str, folder: Path) -> Path:
    """Write `<query>.sql` files for the comma-separated variants; returns the folder."""
    folder.mkdir(parents=True, exist_ok=True)
    for query_name, text in rewrite(names).items():
        (folder / f"{query_name}.sql").write_text(text)
    return folder


def apply(names: str) -> None:
    """Use the variants in this process (scenario d calls the operator's code in-process)."""
    queries().update(rewrite(names))
