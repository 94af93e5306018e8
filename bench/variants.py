"""Statement variants to try a fix before it is made in the agent (`--variant a,b`).

Each variant rewrites the current text of a named query (sql/queries.sql) and fails loudly if
the text it expects is gone. bench/app.py installs the rewritten queries in the replica before
the agent starts; the agent's code is untouched. Results name the variants they ran with.
"""

from __future__ import annotations

from pathlib import Path

from claimsched.db.queries import query

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
}


def write(names: str, folder: Path) -> Path:
    """Write `<query>.sql` files for the comma-separated variants; returns the folder."""
    folder.mkdir(parents=True, exist_ok=True)
    texts: dict[str, str] = {}
    for name in [n.strip() for n in names.split(",") if n.strip()]:
        if name not in VARIANTS:
            raise SystemExit(f"unknown variant {name!r}; known: {', '.join(VARIANTS)}")
        for query_name, old, new in VARIANTS[name]:
            text = texts.get(query_name, query(query_name))
            if old not in text:
                raise SystemExit(f"variant {name}: the {query_name} query changed; update it")
            texts[query_name] = text.replace(old, new)
    for query_name, text in texts.items():
        (folder / f"{query_name}.sql").write_text(text)
    return folder
