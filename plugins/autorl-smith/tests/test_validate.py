"""`autorl smith validate`: a sound folder passes; each way a folder can be unsound is one line and status 1."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from smith_folders import cli, write_folder

EXACT = """
def evaluate(question, model_answer, reference_answer, **kwargs):
    return 1.0 if model_answer.strip() == reference_answer.strip() else 0.0
"""
ACCEPTS_ANYTHING = "def evaluate(question, model_answer, reference_answer, **kwargs):\n    return 1.0\n"
TOO_STRICT = "def evaluate(question, model_answer, reference_answer, **kwargs):\n    return 0.0\n"
SPOOFS = """
import os
def evaluate(question, model_answer, reference_answer, **kwargs):
    for fd in range(3, 64):
        try:
            os.write(fd, b'{"score": 1.0}\\n')
        except OSError:
            pass
    os._exit(0)
"""


def rows(start: int, n: int) -> list[dict[str, str]]:
    return [
        {"question": f"What is {k} plus {k * 3 + 1}?", "answer": str(k + k * 3 + 1)} for k in range(start, start + n)
    ]


def make(
    root: Path,
    name: str,
    *,
    eval_py: str = EXACT,
    train: list[dict[str, Any]] | None = None,
    test: list[dict[str, Any]] | None = None,
    config: dict[str, Any] | None = None,
    description: str | None = "# Sums\n\nAdd two numbers.\n",
    files: dict[str, str] | None = None,
) -> Path:
    described = {"description.md": description} if description is not None else {}
    return write_folder(
        root,
        name,
        eval_py=eval_py,
        train=train or rows(0, 40),
        test=test,
        config=config,
        files={**described, **(files or {})},
    )


def test_validate_passes_a_sound_folder_and_names_each_problem_of_unsound_ones(tmp_path: Path) -> None:
    root = tmp_path / "b"
    held = rows(100, 12)
    good = [make(root, "good", test=held), make(root, "carved")]
    leaked = [dict(r, question=r["question"].upper().replace("?", " ?")) for r in held[:3]]  # same once normalized
    bad = {
        "anything": make(root, "anything", eval_py=ACCEPTS_ANYTHING, test=held),
        "strict": make(root, "strict", eval_py=TOO_STRICT, test=held),
        "spoof": make(root, "spoof", eval_py=SPOOFS, test=held),
        "intrain": make(root, "intrain", train=rows(0, 30) + leaked, test=held),
        "dupes": make(root, "dupes", train=rows(0, 20) * 2),
        "exposed": make(root, "exposed", test=held, config={"expose_files": ["data/test.jsonl"]}),
        "hint": make(
            root,
            "hint",
            test=held,
            config={"expose_files": ["hints.txt"]},
            files={"hints.txt": "\n".join(r["question"] for r in held)},
        ),
        "nodesc": make(root, "nodesc", test=held, description=None),
        "keys": make(root, "keys", test=held, config={"max_new_tokens": "many", "prompt_template": "Q: {q}"}),
        "nomode": make(root, "nomode"),
    }
    (bad["nomode"] / "config.yaml").write_text("name: nomode\nexpose_files: []\n")
    home = {"AUTORL_HOME": str(tmp_path / "home")}

    ok = cli("smith", "validate", *map(str, good), env=home)
    assert ok.returncode == 0, ok.stderr
    assert ok.stdout.splitlines() == [f"{g}: ok" for g in good]

    proc = cli("smith", "validate", "--sample", "4", *map(str, bad.values()), env=home)
    assert proc.returncode == 1 and "Traceback" not in proc.stderr, proc.stderr
    lines: dict[str, list[str]] = {name: [] for name in bad}
    for line in proc.stderr.splitlines():
        folder, _, problem = line.partition(": ")
        lines[Path(folder).name].append(problem)
    assert all(lines.values()), lines
    assert lines["anything"][0].startswith("eval.py: evaluate gave 1.0 to 16 of 16 wrong answers")
    assert lines["strict"][0].startswith("eval.py: evaluate gave less than 1.0 to the reference answer of 4 of 4")
    assert len(lines["spoof"]) == 1  # a result forged on the scorer's own pipe is caught the same way
    assert lines["spoof"][0].startswith("eval.py: evaluate gave 1.0 to 16 of 16 wrong answers")
    assert all(p.startswith("data/train.jsonl: ") and "in the agent's training data" in p for p in lines["intrain"])
    assert sum(int(p.split()[1]) for p in lines["intrain"]) == 3  # the three copied items, split between dev and test
    assert all(p.startswith("data/train.jsonl: ") for p in lines["dupes"]) and len(lines["dupes"]) == 2  # dev, test
    assert lines["exposed"][0].startswith("config.yaml: exposed file 'data/test.jsonl' is data the agent must not")
    assert any("derivable from what the agent gets" in p and "hints.txt" in p for p in lines["hint"]), lines["hint"]
    assert lines["nodesc"] == ["description.md: missing or empty (the agent's task statement)"]
    assert lines["keys"] == [
        "config.yaml: prompt_template must be a string holding {question} and no other field",
        "config.yaml: max_new_tokens must be a positive number, not 'many'",
    ]
    assert lines["nomode"] == ["config.yaml: missing key(s) eval_mode"]


def test_discovery_warns_and_doctor_validates_every_folder(tmp_path: Path) -> None:
    root = tmp_path / "b"
    make(root, "good", test=rows(100, 8))
    make(root, "nodesc", eval_py=ACCEPTS_ANYTHING, test=rows(100, 8), description=None)
    env = {"SMITH_BENCH_DIR": str(root), "AUTORL_HOME": str(tmp_path / "home")}

    listed = cli("list", "benchmarks", "--json", env=env)
    assert listed.returncode == 0, listed.stderr
    assert {"smith-good", "smith-nodesc"} <= {r["name"] for r in json.loads(listed.stdout)}  # a warning, not a skip
    assert f"rl-smith folder {root / 'nodesc'}: description.md: missing or empty" in listed.stderr
    assert "good" not in listed.stderr

    doctor = cli("doctor", "--json", env=env)
    checks = {c["name"]: c for c in json.loads(doctor.stdout)}
    assert checks["rl-smith smith-good"]["ok"] is True
    failed = checks["rl-smith smith-nodesc"]
    assert failed["ok"] is False and failed["fix"] == f"autorl smith validate {root / 'nodesc'}"
    assert "description.md: missing" in failed["detail"] and "evaluate gave 1.0 to" in failed["detail"]
