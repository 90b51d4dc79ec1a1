"""What plugin authors get: docs for every hook, a scaffold that works unchanged, a testing kit, `autorl doctor`."""

from __future__ import annotations

import inspect
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from autorl import hookspecs

from .conftest import ROOT, cli, echo_answers, write_stub_checkpoint

DOCS = ROOT / "docs" / "plugins"


def test_every_hook_is_documented_with_its_arguments() -> None:
    text = (DOCS / "hooks.md").read_text()
    hooks = [name for name, fn in vars(hookspecs).items()
             if inspect.isfunction(fn) and hasattr(fn, "autorl_spec")]
    assert hooks, "no hookspecs found"
    for name in hooks:
        match = re.search(rf"^## {name}\n(.*?)(?=^## |\Z)", text, flags=re.M | re.S)
        assert match, f"docs/plugins/hooks.md has no section for hook {name}"
        section = match.group(1)
        for arg in inspect.signature(getattr(hookspecs, name)).parameters:
            assert f"`{arg}`" in section or f"({arg})" in section, f"{name}: argument {arg} undocumented"
        assert "```python" in section and "@hookimpl" in section, f"{name}: no example"
        assert getattr(hookspecs, name).__doc__, f"{name}: no docstring"


def test_docs_index_links_resolve() -> None:
    index = (DOCS / "README.md").read_text()
    for target in re.findall(r"\]\(([\w.-]+\.md)\)", index):
        assert (DOCS / target).is_file(), target


def _pip(*args: str) -> None:
    subprocess.run([sys.executable, "-m", "pip", "-q", *args], check=True, capture_output=True, timeout=600)


def test_scaffolded_benchmark_installs_is_discovered_and_its_tests_pass(
    tmp_path: Path, shared_home: Path, tiny_model: Path
) -> None:
    cli("new", "benchmark", "scaffold-check", "--dir", str(tmp_path), check=True)
    root = tmp_path / "autorl-scaffold-check"
    assert (root / "src" / "autorl_scaffold_check" / "plugin.py").is_file()
    _pip("install", "--no-deps", "--no-build-isolation", "-e", str(root))
    try:
        rows = json.loads(cli("list", "benchmarks", "--json", check=True).stdout)
        assert {"name": "scaffold-check", "distribution": "autorl-scaffold-check"}.items() <= next(
            r for r in rows if r["name"] == "scaffold-check").items()
        proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(root / "tests")],
                              capture_output=True, text=True, cwd=root, timeout=900,
                              env={**os.environ, "AUTORL_HOME": str(shared_home)})
        assert proc.returncode == 0, proc.stdout + proc.stderr
        assert "6 passed" in proc.stdout  # the template's tests, the hidden-items contract among them
    finally:
        _pip("uninstall", "-y", "autorl-scaffold-check")


def test_scaffolded_agent_installs_and_its_tests_pass(tmp_path: Path) -> None:
    cli("new", "agent", "scaffold-agent", "--dir", str(tmp_path), check=True)
    root = tmp_path / "autorl-scaffold-agent"
    _pip("install", "--no-deps", "--no-build-isolation", "-e", str(root))
    try:
        rows = json.loads(cli("list", "agents", "--json", check=True).stdout)
        assert any(r["name"] == "scaffold-agent" and r["ready"] for r in rows)
        proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(root / "tests")],
                              capture_output=True, text=True, cwd=root, timeout=600)
        assert proc.returncode == 0, proc.stdout + proc.stderr
    finally:
        _pip("uninstall", "-y", "autorl-scaffold-agent")


def test_scaffold_refuses_bad_names_and_existing_folders(tmp_path: Path) -> None:
    proc = cli("new", "benchmark", "Bad_Name", "--dir", str(tmp_path))
    assert proc.returncode == 2 and "lower-case letters" in proc.stderr
    cli("new", "benchmark", "twice", "--dir", str(tmp_path), check=True)
    proc = cli("new", "benchmark", "twice", "--dir", str(tmp_path))
    assert proc.returncode == 2 and "already exists" in proc.stderr


def test_scaffold_templates_are_package_data_files() -> None:
    import fnmatch

    import tomllib

    from autorl.scaffold import KINDS, templates

    package = ROOT / "src" / "autorl"
    shipped = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["package-data"]["autorl"]
    files = [f.relative_to(package).as_posix() for f in (package / "templates").rglob("*") if f.is_file()]
    assert files and all(any(fnmatch.fnmatch(f, g.replace("**/", "*")) for g in shipped) for f in files)
    for kind in KINDS:
        made = templates(kind)
        assert {"pyproject.toml", "README.md", "src/{module}/plugin.py", "tests/test_plugin.py"} <= made.keys()
        assert sorted(made) == sorted(f[len(f"templates/{kind}/"):-len(".tmpl")] for f in files
                                      if f.startswith(f"templates/{kind}/"))


def test_doctor_reports_each_piece_with_what_to_do(tmp_path: Path) -> None:
    env = {"AUTORL_HOME": str(tmp_path / "home"), "AUTORL_OPENCOMPASS_PYTHON": sys.executable}
    checks = {c["name"]: c for c in json.loads(cli("doctor", "--json", env=env, check=True).stdout)}
    for name in ("autorl", "plugins", "AUTORL_HOME", "backend hf", "backend vllm", "GPUs", "sandbox (bubblewrap)",
                 "OpenCompass environment", "OpenHands environment"):
        assert name in checks, name
    assert checks["backend hf"]["ok"] is True
    assert "example-plugin" in checks["plugins"]["detail"]
    oc = checks["OpenCompass environment"]
    assert oc["ok"] is False and "cannot import opencompass" in oc["detail"] and "pip install opencompass" in oc["fix"]
    assert checks["GPUs"]["ok"] or checks["GPUs"]["fix"]
    table = cli("doctor", env=env, check=True).stdout
    assert "OpenCompass" in table


def test_local_grader_fixture_serves_a_real_grader(local_grader) -> None:  # type: ignore[no-untyped-def]
    grader = local_grader("echo", backend="scripted")
    write_stub_checkpoint(grader.output / "v1", echo_answers(10))
    record = grader.client.submit(str(grader.output / "v1"))
    assert record["status"] == "done" and record["score"] == pytest.approx(50.0)
    assert grader.admin.state()["best"]["submission_id"] == record["submission_id"]
