"""The README's quick start, as written: its blocks are saved and its shell steps run in a real
bash (tests/helpers/quickstart.py records each tool they call), and every call is carried out
against real parts: `claimsched agent` starts three real agent processes on `app.py` against a
real Postgres, `claimsched ...` runs the real CLI, `kubectl` talks to the Kubernetes emulator
that the real `claimsched-operator` watches, `helm install` renders the chart with the README's
values and starts the operator with the environment the chart gives it, and `docker` checks
that the image the chart runs is the one built from operator/Dockerfile and pushed.

The README names a placeholder database (quickstart.PLACEHOLDER_DSN); every command gets the
test's database in its place. A call these tests cannot carry out fails them, so the README's
quick start holds nothing untested."""

from __future__ import annotations

import base64
import os
import shlex
import signal
import subprocess
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

import kubernetes
import pytest
import yaml
from tests.chart import chart
from tests.helpers import quickstart
from tests.helpers.kube_emulator import Served, kubectl_get, printed_rows
from tests.helpers.polling import wait_for

from claimsched.db import Store
from conftest import GROUP, PLURAL, VERSION, Operator

BIN = Path(sys.executable).parent
REPLICAS = 3  # "start it in three terminals"
CLAIMSCHEDULE_NAMES = {"csched", "claimschedule", "claimschedules", f"{PLURAL}.{GROUP}"}
JOB = "daily-report"


@dataclass
class User:
    """Carries out the quick start's calls, in order, against real parts."""

    dsn: str
    workdir: Path
    served: Served | None = None
    client: kubernetes.client.ApiClient | None = None
    agents: list[subprocess.Popen[bytes]] = field(default_factory=list)
    operator: Operator | None = None
    served_namespaces: list[str] = field(default_factory=list)
    built: set[str] = field(default_factory=set)
    pushed: set[str] = field(default_factory=set)
    printed: list[str] = field(default_factory=list)  # what `kubectl get` and the CLI printed
    shown: list[dict[str, str]] = field(default_factory=list)  # the last `kubectl get` rows

    # -- the calls ------------------------------------------------------------------------------

    def carry_out(self, calls: list[quickstart.Call]) -> None:
        handlers: dict[str, Callable[[quickstart.Call], None]] = {
            "pip": self.pip, "claimsched": self.claimsched, "docker": self.docker,
            "kubectl": self.kubectl, "helm": self.helm,
        }
        for call in calls:
            handlers[call.argv[0]](call)

    def pip(self, call: quickstart.Call) -> None:
        assert call.argv[1:2] == ["install"] and len(call.argv) == 3, f"unexpected: {call}"
        # The checkout itself, which this test suite runs from (tests/install installs the
        # wheel built from it into fresh virtualenvs).
        target = call.cwd / call.argv[2] / "pyproject.toml"
        assert target.resolve() == quickstart.REPO / "pyproject.toml", f"{call}: not the checkout"

    def environment(self, call: quickstart.Call) -> dict[str, str]:
        assert call.env.get("CLAIMSCHED_DSN") == quickstart.PLACEHOLDER_DSN, \
            f"{call}: CLAIMSCHED_DSN is {call.env.get('CLAIMSCHED_DSN')!r}"
        env = {k: v for k, v in os.environ.items() if not k.startswith("CLAIMSCHED_")}
        env.update({k: v.replace(quickstart.PLACEHOLDER_DSN, self.dsn)
                    for k, v in call.env.items()})
        if "PYTHONPATH" in call.env:  # relative to where the user typed it
            env["PYTHONPATH"] = os.pathsep.join(
                str(call.cwd / p) for p in call.env["PYTHONPATH"].split(os.pathsep))
        return env

    def claimsched(self, call: quickstart.Call) -> None:
        env = self.environment(call)
        if call.argv[1] == "agent":
            for replica in range(REPLICAS):
                with (self.workdir.parent / f"agent-{replica}.log").open("wb") as log:
                    self.agents.append(subprocess.Popen(
                        [str(BIN / "claimsched"), *call.argv[1:]], cwd=call.cwd, env=env,
                        stdout=log, stderr=subprocess.STDOUT))
            return
        done = subprocess.run([str(BIN / "claimsched"), *call.argv[1:]], cwd=call.cwd, env=env,
                              capture_output=True, text=True, timeout=60)
        self.printed.append(f"$ {call}\n{done.stdout}{done.stderr}")
        assert done.returncode == 0, f"{self.printed[-1]}\n{self.agent_logs()}"

    def docker(self, call: quickstart.Call) -> None:
        verb, *rest = call.argv[1:]
        if verb == "push":
            (image,) = rest
            assert image in self.built, f"{call}: pushes an image it did not build"
            self.pushed.add(image)
            return
        assert verb == "build", f"unexpected: {call}"
        options, (context,) = flags(rest, {"-f", "--file", "-t", "--tag"})
        dockerfile = options.get("-f") or options.get("--file")
        assert dockerfile, f"{call}: say which Dockerfile"
        assert (call.cwd / dockerfile).resolve() == quickstart.REPO / "operator" / "Dockerfile"
        assert (call.cwd / context / "pyproject.toml").resolve() == \
            quickstart.REPO / "pyproject.toml", f"{call}: the context is not the checkout"
        self.built.add(options.get("-t") or options["--tag"])

    def kubectl(self, call: quickstart.Call) -> None:
        options, args = flags(call.argv[1:], {"-n", "--namespace", "-f", "--filename", "-o"},
                              switches={"-A", "--all-namespaces", "-w", "--watch",
                                        "--overwrite"})
        namespace = options.get("-n") or options.get("--namespace")
        verb, *args = args
        if verb == "create" and args[0] == "namespace":
            self.core.create_namespace(namespace_named(args[1]))
        elif verb == "create" and args[:2] == ["secret", "generic"]:
            literals = [a.split("=", 1)[1] for a in args[3:] if a.startswith("--from-literal=")]
            assert len(literals) == len(args) - 3, f"unexpected: {call}"
            self.core.create_namespaced_secret(namespace or "default", kubernetes.client.V1Secret(
                metadata=kubernetes.client.V1ObjectMeta(name=args[2]),
                string_data=dict(literal.split("=", 1) for literal in literals)))
        elif verb == "apply":
            source = options.get("-f") or options["--filename"]
            text = call.stdin if source == "-" else (call.cwd / source).read_text()
            assert text is not None
            for doc in yaml.safe_load_all(text):
                self.apply(doc, namespace)
        elif verb == "annotate":
            assert args[0] in CLAIMSCHEDULE_NAMES, f"unexpected: {call}"
            name, *pairs = args[1:]
            annotations = dict(pair.split("=", 1) for pair in pairs)
            self.api.patch_namespaced_custom_object(
                GROUP, VERSION, namespace or "default", PLURAL, name,
                {"metadata": {"annotations": annotations}})
        elif verb == "get":
            assert args[0] in CLAIMSCHEDULE_NAMES, f"unexpected: {call}"
            self.printed.append(f"$ {call}\n{self.get(namespace or 'default', options)}")
        else:
            raise AssertionError(f"the quick-start test cannot carry out: {call}")

    def apply(self, doc: dict[str, Any], namespace: str | None) -> None:
        assert (doc["apiVersion"], doc["kind"]) == (f"{GROUP}/{VERSION}", "ClaimSchedule")
        meta = doc["metadata"]
        assert namespace in (None, meta.get("namespace")) or "namespace" not in meta, \
            "kubectl refuses a -n that differs from the object's namespace"
        target = meta.get("namespace") or namespace or "default"
        assert self.operator is not None, "a ClaimSchedule applied before the operator runs"
        assert target in self.served_namespaces, \
            f"{meta['name']} goes to namespace {target!r}, the operator serves " \
            f"{self.served_namespaces}"
        self.api.create_namespaced_custom_object(GROUP, VERSION, target, PLURAL, doc)

    def get(self, namespace: str, options: dict[str, str]) -> str:
        """`kubectl get csched -n NS` once what the user waits for is there: every listed
        ClaimSchedule in sync and Ready, and the run a trigger asked for finished."""

        def settled() -> list[dict[str, Any]] | None:
            found = self.api.list_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL)
            items: list[dict[str, Any]] = cast(dict[str, Any], found)["items"]
            for obj in items:
                status = obj.get("status") or {}
                ready = [c for c in status.get("conditions", []) if c["type"] == "Ready"]
                trigger = (obj["metadata"].get("annotations") or {}).get(
                    "claimsched.io/trigger")
                if status.get("observedGeneration") != obj["metadata"]["generation"] or \
                        not ready or ready[0]["status"] != "True" or \
                        (trigger and (status.get("lastTrigger") != trigger or
                                      (status.get("lastRun") or {}).get("status")
                                      in (None, "running"))):
                    return None
            return list(items) or None

        assert self.operator is not None
        items = wait_for(settled, f"the ClaimSchedules of {namespace} settled", timeout=60,
                         log=lambda: f"{self.operator_log()}\n{self.agent_logs()}")
        assert items and self.served is not None
        self.shown = printed_rows(kubectl_get(
            self.served.url, f"/apis/{GROUP}/{VERSION}/namespaces/{namespace}/{PLURAL}"),
            wide=options.get("-o") == "wide")
        return printed_table(self.shown)

    def helm(self, call: quickstart.Call) -> None:
        options, args = flags(call.argv[1:], {"-n", "--namespace", "--set", "-f", "--values"},
                              switches={"--create-namespace"}, repeated={"--set"})
        verb, release, chart_path = args
        assert verb == "install", f"unexpected: {call}"
        assert (call.cwd / chart_path).resolve() == chart.CHART, f"{call}: not the chart"
        namespace = options.get("-n") or options.get("--namespace") or "default"
        if "--create-namespace" in options:
            self.core.create_namespace(namespace_named(namespace))
        self.core.read_namespace(namespace)  # helm fails on a namespace that does not exist
        values: dict[str, Any] = {}
        for file in [options[k] for k in ("-f", "--values") if k in options]:
            values.update(yaml.safe_load((call.cwd / file).read_text()))
        for assignment in options.get("--set", "").split("\0"):
            if assignment:
                set_value(values, assignment)
        with chart.load() as loaded:
            loaded.validate_schema(values)
        docs = chart.documents(values, namespace=namespace, name=release)
        container = chart.pod_spec(docs)["containers"][0]
        assert container["image"] in self.pushed, \
            f"the chart runs {container['image']}, the quick start pushed {self.pushed}"
        env = chart.env(docs)
        ref = env["CLAIMSCHED_DSN"]["secretKeyRef"]
        secret = self.core.read_namespaced_secret(ref["name"], namespace)
        dsn = (secret.string_data or {}).get(ref["key"]) or \
            base64.b64decode((secret.data or {})[ref["key"]]).decode()
        assert dsn == quickstart.PLACEHOLDER_DSN, f"the operator's Secret holds {dsn!r}"
        literal = {k: str(v) for k, v in env.items() if isinstance(v, str)}
        self.served_namespaces = literal["CLAIMSCHED_OPERATOR_NAMESPACES"].split(",")
        assert self.served is not None
        # The test's only changes to the chart's environment: free ports for the endpoints
        # (Operator.start picks them), a status refresh every 0.5 s instead of every 15 s.
        ports = {"CLAIMSCHED_OPERATOR_HEALTH_PORT", "CLAIMSCHED_OPERATOR_METRICS_PORT"}
        self.operator = Operator(self.served, self.dsn, self.workdir.parent / "operator", {
            **{k: v for k, v in literal.items() if k not in ports},
            "CLAIMSCHED_DSN": self.dsn,
            "POD_NAME": f"{release}-0", "POD_NAMESPACE": namespace,
            "CLAIMSCHED_OPERATOR_STATUS_INTERVAL_SECONDS": "0.5",
        })
        self.operator.folder.mkdir()
        self.operator.start()

    # -- helpers --------------------------------------------------------------------------------

    @property
    def api(self) -> kubernetes.client.CustomObjectsApi:
        return kubernetes.client.CustomObjectsApi(self.client)

    @property
    def core(self) -> kubernetes.client.CoreV1Api:
        return kubernetes.client.CoreV1Api(self.client)

    def agent_logs(self) -> str:
        return "\n".join(f"--- {p.name} ---\n{p.read_text(errors='replace')[-3000:]}"
                         for p in sorted(self.workdir.parent.glob("agent-*.log")))

    def operator_log(self) -> str:
        return self.operator.log()[-4000:] if self.operator else ""

    def stop(self) -> None:
        for agent in self.agents:
            if agent.poll() is None:
                agent.send_signal(signal.SIGTERM)
        for agent in self.agents:
            try:
                agent.wait(30)
            except subprocess.TimeoutExpired:
                agent.kill()
                agent.wait(10)
        if self.operator is not None:
            self.operator.kill()


def namespace_named(name: str) -> kubernetes.client.V1Namespace:
    return kubernetes.client.V1Namespace(metadata=kubernetes.client.V1ObjectMeta(name=name))


def flags(argv: list[str], valued: set[str], switches: frozenset[str] | set[str] = frozenset(),
          repeated: frozenset[str] | set[str] = frozenset()) -> tuple[dict[str, str], list[str]]:
    """(options, positional arguments) of a command line: `valued` options take the next
    argument (or `--opt=value`), `switches` none; a `repeated` option's values are joined by
    NUL; anything else that starts with `-` is a call the tests do not know."""
    options: dict[str, str] = {}
    args: list[str] = []
    it = iter(argv)
    for arg in it:
        name, eq, inline = arg.partition("=")
        if name in valued:
            value = inline if eq else next(it)
            options[name] = f"{options[name]}\0{value}" if name in repeated and name in options \
                else value
        elif arg in switches:
            options[arg] = ""
        elif arg.startswith("-") and arg != "-" and not arg.startswith("--from-literal="):
            raise AssertionError(f"the quick-start test does not know the option {arg}")
        else:
            args.append(arg)
    return options, args


def set_value(values: dict[str, Any], assignment: str) -> None:
    """Apply one `helm --set a.b=c[,d=e]` (scalars typed as Helm types them, `{x,y}` a list)."""
    for pair in split_set(assignment):
        path, _, raw = pair.partition("=")
        *parents, leaf = path.split(".")
        node = values
        for key in parents:
            node = node.setdefault(key, {})
        node[leaf] = helm_scalar(raw)


def split_set(assignment: str) -> list[str]:
    """`a=1,b={x,y}` -> ['a=1', 'b={x,y}'] (commas inside braces belong to a list)."""
    pairs, depth, current = [], 0, ""
    for char in assignment:
        depth += {"{": 1, "}": -1}.get(char, 0)
        if char == "," and depth == 0:
            pairs.append(current)
            current = ""
        else:
            current += char
    return [*pairs, current]


def helm_scalar(raw: str) -> Any:
    if raw.startswith("{") and raw.endswith("}"):
        return [helm_scalar(item) for item in raw[1:-1].split(",") if item]
    if raw in ("true", "false"):
        return raw == "true"
    if raw == "null":
        return None
    if raw.lstrip("-").isdigit():
        return int(raw)
    return raw


def printed_table(rows: list[dict[str, str]]) -> str:
    header = list(rows[0])
    widths = [max(len(h), *(len(r[h]) for r in rows)) for h in header]
    return "\n".join("   ".join(v.ljust(w) for v, w in zip(r, widths, strict=True)).rstrip()
                     for r in [header, *[list(row.values()) for row in rows]])


@pytest.fixture
def user(empty_dsn: str, tmp_path: Path) -> Iterator[Callable[..., User]]:
    """A user with a fresh checkout and an empty database; stops what they started."""
    made: list[User] = []

    def make(**parts: Any) -> User:
        made.append(User(empty_dsn, quickstart.checkout(tmp_path / "checkout"), **parts))
        return made[-1]

    try:
        yield make
    except BaseException:
        for u in made:
            print(u.operator_log(), u.agent_logs(), *u.printed, sep="\n")
        raise
    finally:
        for u in made:
            u.stop()


def runs_of(dsn: str, job: str) -> tuple[list[tuple[str, str, int]], int]:
    """(kind, status, attempt) of each run of `job`, and how many effect receipts it has."""
    store = Store(dsn)
    store.open()
    try:
        with store.connection() as conn:
            runs = conn.execute("SELECT kind, status, attempt FROM job_runs WHERE job_name = %s",
                                [job]).fetchall()
            (receipts,) = conn.execute("SELECT count(*) FROM job_effects WHERE job_name = %s",
                                       [job]).fetchone() or (0,)
    finally:
        store.close()
    return [(str(k), str(s), int(a)) for k, s, a in runs], int(receipts)


def test_every_block_of_the_quick_start_is_marked_and_run_by_a_test() -> None:
    found = quickstart.blocks()
    assert quickstart.fences() == len(found), "a quick-start block without a marker"
    used = {"app.py", "daily-report.yaml", *KUBERNETES, *WITHOUT_KUBERNETES}
    assert set(found) == used, f"marked but not run: {set(found) - used}; " \
        f"run but missing: {used - set(found)}"


KUBERNETES = ["install", "run-app", "operator", "schedule"]
WITHOUT_KUBERNETES = ["install", "run-app", "without-kubernetes"]


def test_the_quick_start_runs_the_job_once_through_the_operator_as_written(
        user: Callable[..., User], served: Served, client: kubernetes.client.ApiClient) -> None:
    found = quickstart.blocks()
    u = user(served=served, client=client)
    quickstart.save_files(found, u.workdir)
    calls = quickstart.run_steps(found, KUBERNETES, u.workdir)
    assert [c.argv[0] for c in calls if c.argv[0] in ("helm", "kubectl")], "no cluster steps"
    u.carry_out(calls)
    assert u.shown, "the quick start never shows the ClaimSchedule (kubectl get)"
    (row,) = u.shown
    assert (row["NAME"], row["READY"], row["LAST STATUS"], row["AGENTS"]) == \
        (JOB, "True", "done", str(REPLICAS)), \
        u.printed[-1]
    runs, receipts = runs_of(u.dsn, JOB)
    assert runs == [("manual", "done", 1)], runs
    assert receipts == 1
    obj = cast(dict[str, Any], u.api.get_namespaced_custom_object(
        GROUP, VERSION, u.served_namespaces[0], PLURAL, JOB))
    assert obj["status"]["lastRun"]["status"] == "done"
    assert obj["status"]["liveAgents"] == REPLICAS


def test_the_quick_start_without_kubernetes_runs_the_job_once_as_written(
        user: Callable[..., User]) -> None:
    found = quickstart.blocks()
    u = user()
    quickstart.save_files(found, u.workdir)
    u.carry_out(quickstart.run_steps(found, WITHOUT_KUBERNETES, u.workdir))
    runs, receipts = runs_of(u.dsn, JOB)
    assert runs == [("manual", "done", 1)], runs
    assert receipts == 1
    assert JOB in u.printed[-1] and "done" in u.printed[-1], u.printed[-1]


def test_the_quick_start_helm_values_render_a_valid_chart() -> None:
    """The README's `helm install` values pass the chart's schema and render (the cluster test
    above starts the operator from them too; this one needs no database)."""
    found = quickstart.blocks()
    (line,) = [line for line in " ".join(found["operator"].body.split("\\\n")).splitlines()
               if line.startswith("helm ")]
    options, _ = flags(shlex.split(line)[1:], {"-n", "--set"},
                       switches={"--create-namespace"}, repeated={"--set"})
    values: dict[str, Any] = {}
    for assignment in options["--set"].split("\0"):
        set_value(values, assignment)
    with chart.load() as loaded:
        loaded.validate_schema(values)
    docs = chart.documents(values, namespace=options["-n"])
    assert chart.one(docs, "Deployment")["metadata"]["namespace"] == options["-n"]

