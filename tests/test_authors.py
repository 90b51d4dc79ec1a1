"""What plugin authors get: docs for every hook, a scaffold that works unchanged, a testing kit, `autorl doctor`."""

from __future__ import annotations

import ast
import inspect
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from autorl import hookspecs

from .conftest import ROOT, cli, echo_answers, write_stub_checkpoint
from .fresh_env import fresh_venv

DOCS = ROOT / "docs" / "plugins"


def test_every_hook_is_documented_with_its_arguments() -> None:
    text = (DOCS / "hooks.md").read_text()
    hooks = [name for name, fn in vars(hookspecs).items() if inspect.isfunction(fn) and hasattr(fn, "autorl_spec")]
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


#: Benchmark's public surface: what a plugin author sets, reads, implements or overrides.
BENCHMARK_MEMBERS = {
    "name",
    "version",
    "splits",
    "eval_config",
    "dev_public",
    "public_splits",
    "declared_options",  # set
    "options",
    "hidden_dir",  # read
    "prepare_train_data",
    "prepare_eval_data",
    "score",  # implement
    "load_items",
    "hidden_items_hash",
    "config",
    "description",
    "evaluator",
    "exposed_files",
    "hidden_paths",
    "agent_paths",
    "agent_env",
    "identity",  # override
}


def test_every_public_member_of_benchmark_is_for_plugin_authors_and_documented() -> None:
    from autorl import Benchmark, Item

    class Probe(Benchmark):
        name = "probe"

        def prepare_train_data(self, target_dir: Path) -> None:
            pass

        def score(self, item: Item, completion: str) -> float:
            return 0.0

    members = {n for n in dir(Probe()) if not n.startswith("_")}
    assert members == BENCHMARK_MEMBERS
    code = inspect.getsource(Benchmark)
    text = (DOCS / "benchmarks.md").read_text()
    table = re.search(r"^## The `Benchmark` class\n(.*?)(?=^## )", text, flags=re.M | re.S)
    assert table, "docs/plugins/benchmarks.md has no section on the Benchmark class"
    for name in sorted(members):
        value = getattr(Benchmark, name, None)
        assert (callable(value) and value.__doc__) or re.search(rf"#:[^\n]*\n\s*(self\.)?{name}\b", code), name
        assert re.search(rf"^\| `{name}[`(]", table.group(1), flags=re.M), f"{name} is not in benchmarks.md"


#: Where a plugin may import autorl from: the package itself, its pytest kit in tests, and the isolation policies
#: for a plugin that runs third-party or model-written code (autorl.sandbox: the scorer's and the program's
#: policies and the one launcher).
PLUGIN_IMPORTS = {"autorl", "autorl.testing", "autorl.sandbox"}
#: The one bundled plugin that reaches further, an operator's tool beside a benchmark: ``autorl smith generate``
#: calls an LLM with the operator's key, so it starts the LLM gateway (keys kept in it, budget held) as a run
#: does, and ``autorl smith validate`` checks a folder's training data against its hidden items with the audit's
#: own overlap check.
PLUGIN_IMPORT_EXCEPTIONS = {
    ("plugins/autorl-smith/src/autorl_smith/cli.py", "autorl.gateway"),
    ("plugins/autorl-smith/src/autorl_smith/validate.py", "autorl.audit"),
}


def _autorl_imports(code: str) -> list[tuple[str, list[str]]]:
    """(module, names) of every import of autorl in ``code`` (at any depth, type-checking blocks included)."""
    found = []
    for node in ast.walk(ast.parse(code)):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] == "autorl":
            found.append((node.module, [a.name for a in node.names]))
        elif isinstance(node, ast.Import):
            found += [(a.name, []) for a in node.names if a.name.split(".")[0] == "autorl"]
    return found


def test_plugins_templates_and_docs_import_only_from_autorl(tmp_path: Path) -> None:
    import autorl
    from autorl.cli.scaffold import KINDS, scaffold

    sources = {
        str(f.relative_to(ROOT)): f.read_text()
        for f in sorted([*ROOT.glob("plugins/*/src/**/*.py"), *ROOT.glob("tests/example_plugin/src/**/*.py")])
    }
    for kind in KINDS:
        made = scaffold(kind, f"import-check-{kind}", tmp_path)
        sources |= {f"autorl new {kind}: {f.relative_to(made)}": f.read_text() for f in sorted(made.rglob("*.py"))}
    for page in sorted(DOCS.glob("*.md")):
        for n, block in enumerate(re.findall(r"```python\n(.*?)```", page.read_text(), flags=re.S)):
            sources[f"docs/plugins/{page.name} block {n + 1}"] = block
    assert len(sources) > 40, sorted(sources)
    for where, code in sources.items():
        for module, names in _autorl_imports(code):
            assert module in PLUGIN_IMPORTS or (where, module) in PLUGIN_IMPORT_EXCEPTIONS, (
                f"{where} imports from {module}"
            )
            if module == "autorl":
                assert set(names) <= set(autorl.__all__), f"{where}: {set(names) - set(autorl.__all__)}"


def _pip(*args: str) -> None:
    subprocess.run([sys.executable, "-m", "pip", "-q", *args], check=True, capture_output=True, timeout=600)


def doc_block(page: str, heading: str) -> list[str]:
    """The command lines of the first ```bash block in the section ``## heading`` of docs/plugins/``page``."""
    text = (DOCS / page).read_text()
    section = re.search(rf"^## {re.escape(heading)}\n(.*?)(?=^## |\Z)", text, flags=re.M | re.S)
    assert section, f"{page} has no section {heading!r}"
    block = re.search(r"```bash\n(.*?)```", section.group(1), flags=re.S)
    assert block, f"{page}, {heading}: no bash block"
    return [line for line in block.group(1).splitlines() if line.strip()]


def _bash(script: str, cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(
        ["bash", "-euo", "pipefail", "-c", script], capture_output=True, text=True, cwd=cwd, env=env, timeout=900
    )
    assert proc.returncode == 0, f"{script}\n{proc.stdout}\n{proc.stderr}"
    return proc


def test_the_documented_steps_work_verbatim_in_a_fresh_venv_and_in_one_we_do_not_own(
    tmp_path: Path, shared_home: Path, tiny_model: Path
) -> None:
    """docs/plugins/README.md as a new author meets it: the scaffold's steps, command by command, in a fresh
    venv that holds autorl and nothing else (no pytest); then the way into an environment one does not own
    (this test's own), which leaves that environment as it was."""
    env = {**fresh_venv(tmp_path / "fresh"), "AUTORL_HOME": str(shared_home)}
    work = tmp_path / "work"
    work.mkdir()
    steps = doc_block("README.md", "Start from a scaffold")
    assert [s.split()[0] for s in steps] == ["autorl", "pip", "autorl", "python"]
    outputs = [_bash(step, work, env).stdout for step in steps]
    root = work / "autorl-my-bench"
    assert (root / "src" / "autorl_my_bench" / "plugin.py").is_file()
    documented = [step.split("#")[0].strip().replace("./", "") for step in steps[1::2]]  # install, test
    assert outputs[0].splitlines()[-1] == "next: " + " && ".join(documented)  # what `autorl new` says to do
    assert "my-bench" in outputs[2]
    assert re.search(r"\b7 passed\b", outputs[3]), outputs[3]  # the hidden-items contract, the hardening checks
    assert (tmp_path / "fresh" / "venv" / "bin" / "pytest").is_file()  # pytest came with the test extra

    # someone else's environment: this test's own, with autorl and no my-bench in it
    ours = {**env, "PATH": f"{Path(sys.executable).parent}:/usr/bin:/bin", "VIRTUAL_ENV": sys.prefix}
    del ours["AUTORL_HOME"]
    _bash("\n".join(doc_block("README.md", "An environment you do not own")), work, ours)
    listed = _bash("export PYTHONPATH=~/autorl-plugins\nautorl list benchmarks --json", work, ours).stdout
    assert {"name": "my-bench", "distribution": "autorl-my-bench"}.items() <= next(
        r for r in json.loads(listed) if r["name"] == "my-bench"
    ).items()
    assert "my-bench" not in _bash("autorl list benchmarks", work, ours).stdout  # the environment is unchanged


def test_scaffolded_agent_installs_and_its_tests_pass(tmp_path: Path) -> None:
    cli("new", "agent", "scaffold-agent", "--dir", str(tmp_path), check=True)
    root = tmp_path / "autorl-scaffold-agent"
    _pip("install", "--no-deps", "--no-build-isolation", "-e", str(root))
    try:
        rows = json.loads(cli("list", "agents", "--json", check=True).stdout)
        assert any(r["name"] == "scaffold-agent" and r["ready"] for r in rows)
        proc = subprocess.run(
            [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(root / "tests")],
            capture_output=True,
            text=True,
            cwd=root,
            timeout=600,
        )
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

    from autorl.cli.scaffold import KINDS, templates

    package = ROOT / "src" / "autorl"
    shipped = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["package-data"]["autorl"]
    files = [f.relative_to(package).as_posix() for f in (package / "templates").rglob("*") if f.is_file()]
    assert files and all(any(fnmatch.fnmatch(f, g.replace("**/", "*")) for g in shipped) for f in files)
    for kind in KINDS:
        made = templates(kind)
        assert {"pyproject.toml", "README.md", "src/{module}/plugin.py", "tests/test_plugin.py"} <= made.keys()
        assert sorted(made) == sorted(
            f[len(f"templates/{kind}/") : -len(".tmpl")] for f in files if f.startswith(f"templates/{kind}/")
        )


def test_doctor_reports_each_piece_with_what_to_do(tmp_path: Path) -> None:
    env = {"AUTORL_HOME": str(tmp_path / "home"), "AUTORL_OPENCOMPASS_PYTHON": sys.executable}
    checks = {c["name"]: c for c in json.loads(cli("doctor", "--json", env=env, check=True).stdout)}
    for name in (
        "autorl",
        "plugins",
        "AUTORL_HOME",
        "backend hf",
        "backend vllm",
        "GPUs",
        "sandbox (bubblewrap)",
        "OpenCompass environment",
        "OpenHands environment",
    ):
        assert name in checks, name
    assert checks["backend hf"]["ok"] is True
    assert "example-plugin" in checks["plugins"]["detail"]
    oc = checks["OpenCompass environment"]
    assert oc["ok"] is False and "cannot import opencompass" in oc["detail"] and "pip install opencompass" in oc["fix"]
    assert checks["GPUs"]["ok"] or checks["GPUs"]["fix"]
    table = cli("doctor", env={**env, "COLUMNS": "80"}, check=True).stdout
    assert "OpenCompass" in table
    lines = table.splitlines()
    assert max(map(len, lines)) <= 80, table  # doctor's hints were 195 columns
    # every fix is whole, never cut into table fragments: words wrapped as words, and a command (an install
    # above all) wrapped where the shell continues it, each line but its last ending in " \", so that the lines
    # pasted into a shell are the command
    flat = " ".join(table.replace(" \\\n", " ").split())
    assert all(" ".join(c["fix"].split()) in flat for c in checks.values() if c["fix"]), table
    start = next(i for i, line in enumerate(lines) if line.endswith("] OpenCompass environment:"))
    command = [line for line in lines[start + 1 :] if line.startswith("    ")]
    command = command[: next(i for i, line in enumerate(command) if not line.endswith(" \\")) + 1]
    assert len(command) > 1 and " ".join(" ".join(line.removesuffix(" \\").split()) for line in command) == " ".join(
        oc["fix"].split()
    )


def test_local_grader_fixture_serves_a_real_grader(local_grader) -> None:  # type: ignore[no-untyped-def]
    grader = local_grader("echo", backend="scripted")
    write_stub_checkpoint(grader.output / "v1", echo_answers(10))
    record = grader.client.submit(str(grader.output / "v1"))
    assert record["status"] == "done" and record["score"] == pytest.approx(50.0)
    assert grader.admin.state()["best"]["submission_id"] == record["submission_id"]


def test_the_kit_finds_a_hidden_item_in_the_training_data(tmp_path: Path) -> None:
    from autorl import write_jsonl_atomic
    from autorl.builtin.arith import Arith
    from autorl.testing import check_train_data_holds_no_hidden_item

    check_train_data_holds_no_hidden_item(Arith(), tmp_path / "clean")

    class Leaky(Arith):
        def prepare_train_data(self, target_dir: Path) -> None:
            super().prepare_train_data(target_dir)
            assert self.hidden_dir is not None  # the harness (and the kit) set it before preparing
            [item] = self.load_items("test", self.hidden_dir)[7:8]
            write_jsonl_atomic(target_dir / "more.jsonl", [{"prompt": item.input["question"], "answer": "?"}])

    with pytest.raises(AssertionError, match=r"arith: hidden items in the training data: .*test item"):
        check_train_data_holds_no_hidden_item(Leaky(), tmp_path / "leaky")
