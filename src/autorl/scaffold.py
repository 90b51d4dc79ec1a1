"""``autorl new benchmark|agent NAME``: a complete plugin package that installs, is discovered, and tests green."""

from __future__ import annotations

import re
from pathlib import Path

from autorl.errors import UsageError

_NAME = re.compile(r"^[a-z][a-z0-9]*(?:-[a-z0-9]+)*$")


def _names(name: str) -> dict[str, str]:
    if not _NAME.match(name):
        raise UsageError(f"plugin name {name!r}: use lower-case letters, digits and single dashes, e.g. my-bench")
    module = name.replace("-", "_")
    return {
        "name": name,
        "dist": f"autorl-{name}",
        "module": f"autorl_{module}",
        "cls": "".join(part.capitalize() for part in name.split("-")),
    }


BENCHMARK_FILES = {
    "pyproject.toml": '''\
[build-system]
requires = ["setuptools>=68"]
build-backend = "setuptools.build_meta"

[project]
name = "{dist}"
version = "0.1.0"
description = "The {name} benchmark for autorl."
readme = "README.md"
requires-python = ">=3.10"
dependencies = ["autorl"]

[project.optional-dependencies]
test = ["pytest"]

[project.entry-points.autorl]
{name} = "{module}.plugin"

[tool.setuptools.packages.find]
where = ["src"]

[tool.setuptools.package-data]
{module} = ["description.md", "data/*.jsonl"]
''',
    "README.md": '''\
# {dist}

The `{name}` benchmark for [autorl](https://pypi.org/project/autorl/).

```bash
pip install -e .            # then: autorl list benchmarks
autorl eval --task {name} --model autorl:tiny --limit 5
pytest tests
```

Edit `src/{module}/benchmark.py`: where the data comes from, the prompt and decoding (`eval_config`),
and `score`. Agents see only what `prepare_train_data` writes; the hidden splits are drawn with the
installation's secret in `prepare_eval_data` and stay with the grader (docs/plugins/benchmarks.md).
''',
    "src/{module}/__init__.py": '''\
"""The {name} benchmark plugin for autorl."""
''',
    "src/{module}/plugin.py": '''\
"""Hook implementations (keep this module light: it is imported whenever autorl starts)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from autorl import hookimpl


@hookimpl
def register_benchmarks(register: Callable[[type[Any]], None]) -> None:
    from {module}.benchmark import {cls}

    register({cls})
''',
    "src/{module}/benchmark.py": '''\
"""The {name} benchmark."""

from __future__ import annotations

import json
from importlib import resources
from pathlib import Path

from autorl import Benchmark, EvalConfig, Item
from autorl.benchmark import has_hidden_items, read_hidden_items, secret_rng, write_hidden_items

N_DEV, N_TEST = 20, 30


def _train_rows() -> list[dict[str, str]]:
    text = resources.files("{module}").joinpath("data/train.jsonl").read_text()
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def _item(split: str, a: int, b: int) -> Item:
    # ids come from the content, so another data version never pairs different questions under one id
    return Item(f"{{split}}-{{a}}+{{b}}", {{"question": f"What is {{a}} plus {{b}}?"}}, str(a + b))


class {cls}(Benchmark):
    """{name}: replace with one line about the task."""

    name = "{name}"
    version = "1"  # bump whenever data, prompt or scoring change: it is part of the config hash
    eval_config = EvalConfig(
        prompt_template="Q: {{question}}\\nA:",
        max_new_tokens=16,
        temperature=0.0,
        stop=("\\n",),
    )

    def description(self) -> str:
        return resources.files("{module}").joinpath("description.md").read_text()

    def prepare_train_data(self, target_dir: Path) -> None:
        """Everything the agent may see. Never write dev or test items here."""
        target_dir.mkdir(parents=True, exist_ok=True)
        (target_dir / "train.jsonl").write_text("".join(json.dumps(r) + "\\n" for r in _train_rows()))

    def prepare_eval_data(self, hidden_dir: Path) -> None:
        """The hidden splits, drawn with the installation's secret into grader-owned storage: nothing in this
        package (or any public copy of the data) says which items they are."""
        if all(has_hidden_items(hidden_dir, split) for split in self.splits):
            return
        train = {{r["question"] for r in _train_rows()}}
        pool = [(a, b) for a in range(10, 100) for b in range(10, 100) if f"What is {{a}} plus {{b}}?" not in train]
        secret_rng(hidden_dir, f"{{self.name}}/v{{self.version}}").shuffle(pool)
        write_hidden_items(hidden_dir, "dev", [_item("dev", a, b) for a, b in pool[:N_DEV]])
        write_hidden_items(hidden_dir, "test", [_item("test", a, b) for a, b in pool[N_DEV : N_DEV + N_TEST]])

    def load_items(self, split: str, hidden_dir: Path) -> list[Item]:
        """Read only from the hidden folder: a one-line error when it does not hold the items."""
        return read_hidden_items(self.name, hidden_dir, split)

    def score(self, item: Item, completion: str) -> float:
        return 1.0 if completion.strip() == str(item.reference) else 0.0

    def hidden_paths(self) -> list[Path]:
        """Installed files or local mirrors that hold evaluation data, so an agent's sandbox can hide them."""
        return []
''',
    "src/{module}/description.md": '''\
# {name}

What the task is, what the data looks like, how the grader prompts the model and how answers are scored.

## Data
`data/train.jsonl`: one JSON object a line, `{{"question": ..., "answer": ...}}`.

## Metric
Exact match of the completion (stripped) with the answer, in percent.
''',
    "src/{module}/data/train.jsonl": "".join(
        f'{{{{"question": "What is {a} plus {b}?", "answer": "{a + b}"}}}}\n' for a, b in ((1, 2), (3, 4), (15, 26), (37, 48))
    ),
    "tests/test_plugin.py": '''\
"""The plugin is discovered, its splits are disjoint, its scoring works, and it evaluates end to end."""

from __future__ import annotations

import pytest

from autorl import Item
from autorl.registry import get_benchmark
from autorl.testing import check_benchmark_end_to_end, check_hidden_items_secret
from {module}.benchmark import {cls}


def test_discovered_through_its_entry_point() -> None:
    assert get_benchmark("{name}") is {cls}


def test_register_in_a_fresh_plugin_manager(register_plugin) -> None:  # type: ignore[no-untyped-def]
    from {module} import plugin

    register_plugin(plugin, name="{name}", distribution="{dist}")
    assert get_benchmark("{name}") is {cls}


def test_hidden_splits_are_not_in_the_training_data(tmp_path) -> None:  # type: ignore[no-untyped-def]
    bench = {cls}()
    bench.prepare_train_data(tmp_path / "train")
    bench.prepare_eval_data(tmp_path)
    train = (tmp_path / "train" / "train.jsonl").read_text()
    for split in bench.splits:
        for item in bench.load_items(split, tmp_path):
            assert item.input["question"] not in train


def test_hidden_items_exist_only_in_the_hidden_folder(tmp_path) -> None:  # type: ignore[no-untyped-def]
    check_hidden_items_secret({cls}(), tmp_path)


def test_scoring() -> None:
    bench = {cls}()
    assert bench.score(Item("x", {{}}, "4"), " 4") == 1.0
    assert bench.score(Item("x", {{}}, "4"), " 5") == 0.0


def test_end_to_end_with_the_tiny_model() -> None:
    pytest.importorskip("torch", reason="needs the hf backend: pip install 'autorl[hf]'")
    record = check_benchmark_end_to_end("{name}", limit=2)
    assert record["n"] == 2
''',
}

AGENT_FILES = {
    "pyproject.toml": BENCHMARK_FILES["pyproject.toml"].replace("The {name} benchmark", "The {name} agent").replace(
        '{module} = ["description.md", "data/*.jsonl"]', '{module} = ["run.sh"]'),
    "README.md": '''\
# {dist}

The `{name}` agent for [autorl](https://pypi.org/project/autorl/): `pip install -e .`, then
`autorl run --agent {name} --task arith --model autorl:tiny --timeout 300`.

Edit `src/{module}/run.sh` (what the agent does) and `src/{module}/agent.py` (how it is started and which
variables it gets besides the environment contract).
''',
    "src/{module}/__init__.py": '''\
"""The {name} agent plugin for autorl."""
''',
    "src/{module}/plugin.py": '''\
"""Hook implementations (keep this module light: it is imported whenever autorl starts)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from autorl import hookimpl


@hookimpl
def register_agents(register: Callable[[type[Any]], None]) -> None:
    from {module}.agent import {cls}Agent

    register({cls}Agent)
''',
    "src/{module}/agent.py": '''\
"""The {name} agent: a script started in the workspace with the environment contract."""

from __future__ import annotations

import shutil
from importlib import resources

from autorl import Agent, AgentContext


class {cls}Agent(Agent):
    name = "{name}"
    description = "replace with one line about the agent"

    def command(self, ctx: AgentContext) -> list[str]:
        return ["bash", str(resources.files("{module}").joinpath("run.sh"))]

    def environment(self, ctx: AgentContext) -> dict[str, str]:
        return {{}}  # credentials it needs, passed explicitly: nothing else leaks in

    def ready(self) -> tuple[bool, str]:
        return (shutil.which("bash") is not None, "needs bash")
''',
    "src/{module}/run.sh": '''\
#!/usr/bin/env bash
# Runs in $WORKSPACE. Train from $MODEL_PATH on $DATA_PATH, save under $OUTPUT_DIR, submit, before $AUTORL_DEADLINE.
set -euo pipefail
echo "task $TASK, base model $BASE_MODEL, $(( ${{AUTORL_DEADLINE%.*}} - $(date +%s) )) s left"
mkdir -p "$OUTPUT_DIR/v1"
# ... train here, then:
# curl -s -X POST "$GRADING_SERVER_URL/submit" -H "Content-Type: application/json" \\
#      -H "Authorization: Bearer $AUTORL_TOKEN" -d '{{"model_path": "'"$OUTPUT_DIR"'/v1"}}'
''',
    "tests/test_plugin.py": '''\
"""The agent is discovered and builds its command and environment."""

from __future__ import annotations

from pathlib import Path

from autorl import AgentContext
from autorl.registry import get_agent
from {module}.agent import {cls}Agent


def test_discovered_through_its_entry_point() -> None:
    assert get_agent("{name}") is {cls}Agent


def test_command(tmp_path: Path) -> None:
    ctx = AgentContext("arith", "m", tmp_path, tmp_path, tmp_path, tmp_path, "http://127.0.0.1:1", "t", 0.0, tmp_path)
    argv = {cls}Agent().command(ctx)
    assert argv[0] == "bash" and Path(argv[1]).is_file()
    assert {cls}Agent().ready()[0]
''',
}


def scaffold(kind: str, name: str, parent: Path) -> Path:
    """Write the package ``autorl-<name>`` under ``parent``; refuses to overwrite."""
    names = _names(name)
    files = {"benchmark": BENCHMARK_FILES, "agent": AGENT_FILES}.get(kind)
    if files is None:
        raise UsageError(f"autorl new makes a 'benchmark' or an 'agent', not {kind!r}")
    root = parent / names["dist"]
    if root.exists():
        raise UsageError(f"{root} already exists; choose another name or --dir")
    for rel, template in files.items():
        path = root / rel.format(**names)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(template.format(**names))
    return root
