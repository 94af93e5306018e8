"""No secret anywhere: a databaseRef's DSN that cannot be parsed or reached gets a fixed reason
and a fixed message naming the Secret and key, in every shape a DSN (or a mistake) takes; the
value never shows in status, Events, the operator's log or its metrics."""

from __future__ import annotations

import base64
import json

import kubernetes
from tests.helpers.kube_emulator import Served
from tests.helpers.polling import wait_for

from conftest import Operator, claimschedule, condition, create, events, fetch

# name -> (the Secret's value, the secret in it, the reason, what the message says)
SHAPES = {
    "uri": ("postgresql://app:Uri-Pw-1@127.0.0.1:1/app", "Uri-Pw-1", "DatabaseUnreachable",
            "cannot connect to the database it names"),
    "quoted": (r"host=127.0.0.1 port=1 user=app password='Kv-Pw-2 \' \\ x' dbname=app",
               "Kv-Pw-2", "DatabaseUnreachable", "cannot connect to the database it names"),
    "query": ("postgresql://127.0.0.1:1/app?user=app&password=Query-Pw-3", "Query-Pw-3",
              "DatabaseUnreachable", "cannot connect to the database it names"),
    "garbage": ("host=127.0.0.1 password='Garbage-Pw-4", "Garbage-Pw-4", "InvalidDatabaseRef",
                "the value is not a DSN libpq can parse"),
    "pasted": ("Pasted-Pw-5", "Pasted-Pw-5", "InvalidDatabaseRef",
               "the value is not a DSN libpq can parse"),
    "bad-port": ("postgresql://app:Uri-Pw-6@127.0.0.1:notaport/app", "Uri-Pw-6",
                 "DatabaseUnreachable", "cannot connect to the database it names"),
}


def secret(name: str, dsn: str) -> dict[str, object]:
    return {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": name}, "type": "Opaque",
            "data": {"dsn": base64.b64encode(dsn.encode()).decode()}}


def test_a_bad_database_ref_is_named_and_its_secret_shown_nowhere(
        served: Served, api: kubernetes.client.CustomObjectsApi,
        core: kubernetes.client.CoreV1Api, operator: Operator) -> None:
    operator.env["CLAIMSCHED_OPERATOR_DATABASE_REFS"] = "true"
    operator.serve_metrics = True
    operator.start()
    for name, (dsn, _, _, _) in SHAPES.items():
        core.create_namespaced_secret("default", secret(f"{name}-db", dsn))
        create(api, claimschedule(name, "@every 1h", databaseRef={"name": f"{name}-db"}))

    for name, (_, _, reason, says) in SHAPES.items():
        ready = wait_for(lambda n=name: (c := condition(api, n, "Ready")) and
                         c["status"] == "False" and c, f"Ready=False on {name}",
                         log=operator.log)
        assert ready["reason"] == reason
        assert ready["message"] == f"Secret default/{name}-db key 'dsn': {says}"
    wait_for(lambda: len(events(served, "InvalidDatabaseRef")) >= 2, "the Events")
    # Retries come back to the same fixed words.
    wait_for(lambda: operator.log().count("cannot connect to the database it names") >= 8,
             "retries of the unreachable ones", log=operator.log)

    shown = "\n".join([
        json.dumps([fetch(api, name) for name in SHAPES]),
        json.dumps([x.body for x in served.emulator.sent("POST") if x.path.endswith("/events")],
                   default=str),
        json.dumps([x.body for x in served.emulator.sent("PATCH")], default=str),
        operator.log(),
        json.dumps([[k[0], sorted(k[1])] for k in operator.metrics()]),
    ])
    for name, (_, password, _, _) in SHAPES.items():
        assert password not in shown, f"{name}'s secret leaked"
    assert "127.0.0.1:1" not in shown and "notaport" not in shown  # no driver text either
