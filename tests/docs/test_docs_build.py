"""The docs site builds strictly (a broken link or anchor fails it), its reference pages hold
what the code defines, and the code and manifests its pages show are whole: Python blocks
define every name they use, ClaimSchedule blocks pass the CRD's schema."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from claimsched.cli import parser
from claimsched.settings import AgentSettings
from claimsched_operator.settings import OperatorSettings
from tests.helpers.crd_schema import load_crd

REPO = Path(__file__).resolve().parents[2]
DOCS = REPO / "docs"
PAGES = sorted((DOCS / "pages").rglob("*.md"))
BIN = Path(sys.executable).parent
BLOCK = re.compile(r"^```(\w+)\n(.*?)^```$", re.MULTILINE | re.DOTALL)


def mkdocs_build(config: Path, site: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}  # Material's notice about MkDocs 2.0
    return subprocess.run([str(BIN / "mkdocs"), "build", "--strict", "-f", str(config),
                           "-d", str(site)], capture_output=True, text=True, env=env,
                          timeout=120, cwd=REPO)


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    site = tmp_path_factory.mktemp("site")
    built = mkdocs_build(DOCS / "mkdocs.yml", site)
    assert built.returncode == 0, built.stdout + built.stderr
    yield site


def page(site: Path, name: str) -> str:
    return (site / name).read_text()


def blocks(language: str) -> list[tuple[str, str]]:
    """(where, code) of every fenced block in `language` in the README and the docs' pages."""
    found = []
    for path in [REPO / "README.md", *PAGES]:
        for i, match in enumerate(BLOCK.finditer(path.read_text())):
            if match[1] == language:
                found.append((f"{path.relative_to(REPO)}#{i}", match[2]))
    return found


def test_the_docs_build_strictly(site: Path) -> None:
    assert (site / "index.html").exists()
    assert (site / "tutorial" / "app-team.html").exists()


def test_the_cli_reference_shows_every_command_help(site: Path) -> None:
    html = page(site, "reference/cli.html")
    for action in parser()._subparsers._group_actions:  # type: ignore[union-attr]
        for name in action.choices:  # type: ignore[union-attr]
            assert f"claimsched {name}</code>" in html, name
            assert f"usage: claimsched {name}" in html, name
    assert "usage: claimsched-operator" in html


def test_the_settings_references_list_every_setting(site: Path) -> None:
    agent = page(site, "reference/agent-settings.html")
    for name, field in AgentSettings.fields.items():
        assert f"<code>{field.alias or 'CLAIMSCHED_' + name.upper()}</code>" in agent, name
    operator = page(site, "reference/operator-settings.html")
    for name, info in OperatorSettings.model_fields.items():
        assert f"<code>{info.alias or 'CLAIMSCHED_' + name.upper()}</code>" in operator, name


def test_the_claimschedule_reference_lists_every_field_of_the_crd(site: Path) -> None:
    html = page(site, "reference/claimschedule.html")
    schema = load_crd(REPO / "crds" / "claimschedule.yaml").version()["schema"]
    for part in ("spec", "status"):
        for name in schema["openAPIV3Schema"]["properties"][part]["properties"]:
            assert f"<code>{part}.{name}</code>" in html, f"{part}.{name}"
    assert "self.heartbeatSeconds * 3 &lt;= (self.leaseSeconds" in html


def test_the_chart_reference_is_the_charts_readme(site: Path) -> None:
    html = page(site, "reference/helm-chart.html")
    assert "<code>database.existingSecret</code>" in html
    assert "<code>claimsched_operator_late</code>" in html


def test_no_reference_marker_is_left_unexpanded(site: Path) -> None:
    for built in site.rglob("*.html"):
        assert "<!-- reference:" not in built.read_text(), built


def test_a_broken_link_or_anchor_fails_the_build(tmp_path: Path) -> None:
    """The site's validation settings, on a page with a bad link and a bad anchor."""
    ours = yaml.safe_load((DOCS / "mkdocs.yml").read_text())
    for link in ("[gone](missing.md)", "[no such heading](#nowhere)"):
        pages = tmp_path / link[1:5] / "pages"
        pages.mkdir(parents=True)
        (pages / "index.md").write_text(f"# Home\n\nSee {link}.\n")
        config = pages.parent / "mkdocs.yml"
        config.write_text(yaml.safe_dump({"site_name": "t", "docs_dir": "pages",
                                          "validation": ours["validation"]}))
        built = mkdocs_build(config, pages.parent / "site")
        assert built.returncode != 0, f"{link} did not fail the build:\n{built.stderr}"
        assert "index.md" in built.stderr and ("missing.md" in built.stderr or
                                               "#nowhere" in built.stderr), built.stderr


def test_python_blocks_define_every_name_they_use(tmp_path: Path) -> None:
    found = blocks("python")
    assert len(found) >= 4
    for i, (where, code) in enumerate(found):
        (tmp_path / f"block_{i}.py").write_text(f"# {where}\n{code}")
    checked = subprocess.run(
        [str(BIN / "ruff"), "check", "--isolated", "--no-cache", "--select", "F,E9",
         str(tmp_path)], capture_output=True, text=True)
    assert checked.returncode == 0, checked.stdout + checked.stderr


def test_claimschedule_blocks_pass_the_crd() -> None:
    crd = load_crd(REPO / "crds" / "claimschedule.yaml")
    found = [(where, doc) for where, text in blocks("yaml")
             for doc in yaml.safe_load_all(text) if doc and doc.get("kind") == "ClaimSchedule"]
    assert found
    for where, doc in found:
        try:
            crd.validate(doc)
        except Exception as e:
            raise AssertionError(f"{where}: {e}") from e
