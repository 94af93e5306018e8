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
    # Applied to the agent and operator since: ordered-insert (claims insert in one global order,
    # so concurrent claims cannot deadlock), replace-join (Replace looked up by primary key),
    # clock-midpoint (the claim reports the database clock mid-statement) and live-agents-join
    # (the operator counts live agents in one pass over the handlers arrays). Add new ones here.
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
