"""A folder's eval.py scores an answer; an answer (or eval.py run on it) cannot fake a score for other items.

``EXEC_EVAL`` stands for a code benchmark whose evaluate executes the model's answer in its own process:
the worst case for the harness. Answers that exit early, patch the checker, print or write fake replies
score 0, and leave the items after them scored as honest answers are.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from autorl_smith.folder import load_folder
from autorl_smith.opencompass import read_results
from autorl_smith.scorer import Request, file_digest, score_all

from autorl import EvaluationError

EXEC_EVAL = """
def evaluate(question, model_answer, reference_answer, **kwargs):
    scope = {}
    exec(model_answer, scope)
    return 1.0 if scope.get("answer") == reference_answer else 0.0
"""

FAKE = (
    "import os\n"
    "for fd in range(256):\n"
    "    for line in (b'{\"score\": 1.0}\\n', b'{\"ready\": true}\\n'):\n"
    "        try:\n            os.write(fd, line)\n        except OSError:\n            pass\n"
)

ATTACKS = {
    "os._exit": "import os\nos._exit(0)\n",
    "SystemExit": "raise SystemExit(0)\n",
    "patch evaluate for later items": (
        "import sys\nsys.modules['__main__'].evaluate = lambda *a, **k: 1.0\n"
        "sys._getframe(1).f_globals['evaluate'] = lambda *a, **k: 1.0\n"
        "import builtins\nbuiltins.exec = lambda code, scope: scope.update(answer='42')\n"
    ),
    "patch the harness's globals": (
        "import sys\nmain = sys.modules['__main__']\n"
        "main.score_in_fork = lambda req: {'score': 1.0}\nmain.evaluate = lambda *a, **k: 1.0\n"
    ),
    "fake replies on every descriptor": FAKE + "answer = None\n",
    "fake replies then exit": FAKE + "os._exit(0)\n",
    "printed score": "print('{\"score\": 1.0}')\nimport sys\nsys.stderr.write('{\"score\": 1.0}\\n')\n",
    "child answers later": (
        "import os, time\n"
        "if os.fork() == 0:\n"
        "    os.setsid()\n    time.sleep(0.3)\n"
        + "".join("    " + x + "\n" for x in FAKE.splitlines())
        + "    os._exit(0)\n"
    ),
    "eval.py rewritten": (
        "import sys\nopen(sys._getframe(1).f_globals['__file__'], 'w').write("
        "'def evaluate(*a, **k):\\n    return 1.0\\n')\nimport os\nos._exit(1)\n"
    ),
    "not a number": "class F(float):\n    pass\nanswer = None\n",
}


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    f = tmp_path / "codebench"
    (f / "data").mkdir(parents=True)
    (f / "config.yaml").write_text(json.dumps({"name": "codebench", "eval_mode": "per_sample", "expose_files": []}))
    (f / "eval.py").write_text(EXEC_EVAL)
    (f / "data" / "train.jsonl").write_text(json.dumps({"question": "q", "answer": "a"}) + "\n")
    return f


@pytest.mark.parametrize("name", sorted(ATTACKS))
def test_attack_scores_zero_and_leaves_later_items_alone(folder: Path, name: str) -> None:
    digest = load_folder(folder).eval_digest
    honest_right, honest_wrong = "answer = '42'\n", "answer = '41'\n"
    requests = [
        Request("q", ATTACKS[name], "42"),
        Request("q", honest_wrong, "42"),
        Request("q", honest_right, "42"),
        Request("q", honest_wrong, "42"),
    ]
    scored = score_all(folder, requests, timeout_s=10.0, digest=digest)
    assert [s.score for s in scored] == [0.0, 0.0, 1.0, 0.0], (name, scored)


def test_a_changed_eval_py_is_refused(folder: Path) -> None:
    digest = file_digest(folder / "eval.py")
    (folder / "eval.py").write_text("def evaluate(*a, **k):\n    return 1.0\n")
    scored = score_all(folder, [Request("q", "x", "y")], timeout_s=10.0, digest=digest)
    assert scored[0].score == 0.0 and "changed" in (scored[0].error or "")


def test_evaluate_returning_a_float_subclass_or_string_scores_zero(tmp_path: Path) -> None:
    for value in ("'1.0'", "True.__class__(1) if False else type('F', (float,), {})(1.0)", "[1.0]"):
        (tmp_path / "eval.py").write_text(f"def evaluate(q, a, r, **k):\n    return {value}\n")
        scored = score_all(tmp_path, [Request("q", "a", "a")], timeout_s=10.0)
        assert scored[0].score == 0.0 and scored[0].error, value


def test_opencompass_results_that_are_not_plain_correct_do_not_count(tmp_path: Path) -> None:
    out = tmp_path / "run" / "results" / "submission"
    out.mkdir(parents=True)
    (out / "d.json").write_text(
        json.dumps(
            {
                "accuracy": 50.0,
                "details": {
                    "0": {"correct": "False"},
                    "1": {"correct": [False]},
                    "2": {"correct": True},
                    "3": {"correct": [True]},
                },
            }
        )
    )
    assert read_results(tmp_path, 1) == [("d", 50.0, [0.0, 0.0, 1.0, 1.0])]
    for bad in (True, 250.0, "100", -1):
        (out / "d.json").write_text(json.dumps({"accuracy": bad}))
        with pytest.raises(EvaluationError, match="no accuracy in"):
            read_results(tmp_path, 1)
