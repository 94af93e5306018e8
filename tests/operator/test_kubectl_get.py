"""`kubectl get claimschedules` as kubectl asks for it (a server-side Table, the CRD's printer
columns), through the real operator's status: READY and STATUS first, an invalid resource no
blank row, and no date column holding a future time (kubectl would print `<invalid>`)."""

from __future__ import annotations

import kubernetes
from tests.helpers.kube_emulator import Served, kubectl_get
from tests.helpers.polling import wait_for

from conftest import NS, Operator, claimschedule, create, status


def test_kubectl_get_shows_ready_and_status_first_and_no_future_date(
        served: Served, api: kubernetes.client.CustomObjectsApi, operator: Operator) -> None:
    operator.start()
    create(api, claimschedule("nightly", "0 3 * * *"))
    create(api, claimschedule("broken", "61 * * * *"))
    wait_for(lambda: status(api, "nightly").get("nextFireTime"), "nightly's next fire time",
             log=operator.log)
    wait_for(lambda: status(api, "broken").get("conditions"), "broken's conditions",
             log=operator.log)
    shown = kubectl_get(served.url, f"/apis/claimsched.io/v1alpha1/namespaces/{NS}/claimschedules")
    default = [c["name"] for c in shown["columnDefinitions"] if not c["priority"]]
    assert default[:3] == ["Name", "Ready", "Status"]
    rows = {row["cells"][0]: dict(zip([c["name"] for c in shown["columnDefinitions"]],
                                      row["cells"], strict=True)) for row in shown["rows"]}
    assert (rows["broken"]["Ready"], rows["broken"]["Status"]) == ("False", "InvalidSchedule")
    assert rows["nightly"]["Ready"] in ("True", "False") and rows["nightly"]["Status"]
    assert rows["nightly"]["Next"] == status(api, "nightly")["nextFireTime"]  # -o wide: a string
    cells = [cell for row in shown["rows"] for cell in row["cells"]]
    assert "<invalid>" not in cells, rows
