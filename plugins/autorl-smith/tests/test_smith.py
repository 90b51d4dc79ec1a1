"""rl-smith folders: discovery with validation, held-out splits, contained third-party scoring, end to end."""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from autorl_smith.folder import discover
from autorl_smith.scorer import Request, score_all
from smith_folders import cli, write_folder

ROWS = [
    {"question": f"not ( {a} ) and ( {b} ) is", "answer": str((not a) and b)}
    for a in (True, False)
    for b in (True, False)
] * 10

EVAL_PY = """
def evaluate(question, model_answer, reference_answer, **kwargs):
    words = model_answer.strip().split()
    return 1.0 if words and words[0].strip(".") == reference_answer else 0.0
"""


def make_folder(
    root: Path,
    name: str,
    *,
    config: dict | None = None,
    eval_py: str = EVAL_PY,
    rows: list | None = None,
    test_rows: list | None = None,
    extra: dict | None = None,
) -> Path:
    return write_folder(
        root,
        name,
        eval_py=eval_py,
        train=rows or ROWS,
        test=test_rows,
        files=extra,
        config={"prompt_template": "Q: {question}\nA:", "max_new_tokens": 6, "stop": ["\n"], **(config or {})},
    )


def test_valid_folders_become_tasks_and_malformed_ones_warn(tmp_path: Path) -> None:
    root = tmp_path / "benchmarks"
    make_folder(root, "boolexpr", extra={"description.md": "# boolean expressions\n"})
    make_folder(root, "nokeys", config={"eval_mode": None})
    (root / "nokeys" / "config.yaml").write_text("name: nokeys\n")
    make_folder(root, "badmode", config={"eval_mode": "vibes"})
    make_folder(root, "noevaluate", eval_py="def score(q, a, r):\n    return 1.0\n")
    make_folder(root, "badjsonl")
    (root / "badjsonl" / "data" / "train.jsonl").write_text('{"question": "q", "answer": "a"}\nnot json\n')
    proc = cli("list", "benchmarks", "--json", env={"SMITH_BENCH_DIR": str(root)})
    assert proc.returncode == 0, proc.stderr
    rows = {r["name"]: r for r in json.loads(proc.stdout)}
    assert "smith-boolexpr" in rows and rows["smith-boolexpr"]["source"] == str(root / "boolexpr")
    assert not {"smith-nokeys", "smith-badmode", "smith-noevaluate", "smith-badjsonl"} & set(rows)
    err = proc.stderr
    assert "nokeys skipped: config.yaml: missing key(s) eval_mode, expose_files" in err
    assert "badmode skipped: config.yaml: eval_mode 'vibes' is not one of per_sample, opencompass" in err
    assert "noevaluate skipped: eval.py: defines no function evaluate" in err
    assert "badjsonl skipped: data/train.jsonl line 2: not valid JSON" in err
    assert "Traceback" not in err


def test_a_folder_given_as_the_task_is_that_task_and_a_broken_one_is_one_line(tmp_path: Path) -> None:
    """`autorl eval --task ./boolexpr`: no SMITH_BENCH_DIR, no install; the folder's problems as discovery says
    them, in one line."""
    good = make_folder(tmp_path / "mine", "boolexpr", extra={"description.md": "# boolean expressions\n"})
    broken = make_folder(tmp_path / "mine", "noevaluate", eval_py="def score(q, a, r):\n    return 1.0\n")
    env = {"SMITH_BENCH_DIR": str(tmp_path / "nothing-here"), "AUTORL_HOME": str(tmp_path / "home")}
    listed = cli("list", "benchmarks", "--json", env=env)
    assert "smith-boolexpr" not in listed.stdout
    bad = cli("eval", "--task", str(broken), "--model", "autorl:tiny", env=env)
    assert bad.returncode == 2 and bad.stderr.strip().splitlines() == [
        f"error: rl-smith folder {broken}: eval.py: defines no function evaluate(question, model_answer, "
        "reference_answer, **kwargs)"
    ], bad.stderr
    # the good one resolves to its task (the run then builds its model; refused here by a model that is none)
    named = cli("eval", "--task", str(good), "--model", str(tmp_path / "no-model"), env=env)
    assert named.returncode == 2 and named.stderr.strip().splitlines() == [
        f"error: model {str(tmp_path / 'no-model')!r} is neither a local directory, a hub id (org/name) nor a "
        "built-in model"
    ], named.stderr


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("AUTORL_HOME", str(tmp_path / "home"))
    return tmp_path / "home"


def _bench(root: Path, name: str):  # type: ignore[no-untyped-def]
    from autorl_smith.benchmark import SmithBenchmark, version_of

    (folder,) = [f for f in discover(root) if f.name == name]
    cls = type(
        "T",
        (SmithBenchmark,),
        {"name": folder.task, "version": version_of(folder), "folder": folder, "source": folder.path},
    )
    return cls()


def test_carved_split_hides_dev_and_test(tmp_path: Path, home: Path) -> None:
    from autorl.resources import prepare_data

    rows = [{"question": f"q{k}", "answer": str(k)} for k in range(50)]
    make_folder(tmp_path / "b", "carved", rows=rows)
    bench = _bench(tmp_path / "b", "carved")
    data = prepare_data(bench)
    train = [json.loads(x)["question"] for x in (data.train_dir / "train.jsonl").read_text().splitlines()]
    dev = [i.input["question"] for i in bench.load_items("dev", data.hidden_dir)]
    test = [i.input["question"] for i in bench.load_items("test", data.hidden_dir)]
    assert (len(train), len(dev), len(test)) == (35, 5, 10)
    assert not set(train) & (set(dev) | set(test)) and not set(dev) & set(test)
    assert json.loads((data.hidden_dir / "split.json").read_text())["source"] == "carved"
    assert (tmp_path / "b" / "carved" / "data") in bench.hidden_paths()


def test_explicit_eval_file_is_the_held_out_data(tmp_path: Path, home: Path) -> None:
    from autorl.resources import prepare_data

    held = [{"question": f"held {k}", "answer": "x"} for k in range(8)]
    make_folder(tmp_path / "b", "explicit", test_rows=held)
    bench = _bench(tmp_path / "b", "explicit")
    data = prepare_data(bench)
    assert len((data.train_dir / "train.jsonl").read_text().splitlines()) == len(ROWS)
    hidden = [i.input["question"] for s in ("dev", "test") for i in bench.load_items(s, data.hidden_dir)]
    assert sorted(hidden) == sorted(r["question"] for r in held)
    assert json.loads((data.hidden_dir / "split.json").read_text())["source"] == "eval_file"


@pytest.mark.parametrize("held", [False, True], ids=["carved", "eval_file"])
def test_hidden_items_contract(tmp_path: Path, home: Path, held: bool) -> None:
    from autorl.testing import check_hidden_items_secret

    rows = [{"question": f"q{k}", "answer": str(k)} for k in range(50)]
    make_folder(tmp_path / "b", "contract", rows=rows, test_rows=rows[:20] if held else None)
    check_hidden_items_secret(_bench(tmp_path / "b", "contract"), tmp_path / "check")


def test_hardening_checks(tmp_path: Path, home: Path) -> None:
    from autorl.testing import check_hardening

    make_folder(tmp_path / "b", "hardened", rows=[{"question": f"q{k}", "answer": str(k)} for k in range(50)])
    check_hardening(lambda: _bench(tmp_path / "b", "hardened"), tmp_path / "check")


def test_two_secrets_draw_different_splits_and_train_follows_the_draw(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from autorl.resources import prepare_data

    rows = [{"question": f"q{k}", "answer": str(k)} for k in range(50)]
    make_folder(tmp_path / "b", "draw", rows=rows)
    draws = []
    for name in ("one", "two"):
        monkeypatch.setenv("AUTORL_HOME", str(tmp_path / name))
        bench = _bench(tmp_path / "b", "draw")
        data = prepare_data(bench)
        train = {json.loads(x)["question"] for x in (data.train_dir / "train.jsonl").read_text().splitlines()}
        dev, test = ({i.input["question"] for i in bench.load_items(s, data.hidden_dir)} for s in ("dev", "test"))
        assert not train & (dev | test) and len(train | dev | test) == 50
        draws.append((train, dev, test))
    assert draws[0][1] != draws[1][1] and draws[0][2] != draws[1][2] and draws[0][0] != draws[1][0]


def test_download_data_runs_once_in_the_cache(tmp_path: Path, home: Path) -> None:
    from autorl.resources import prepare_data

    folder = make_folder(
        tmp_path / "b",
        "dl",
        extra={
            "download_data.py": textwrap.dedent("""
        import json, pathlib
        marker = pathlib.Path("runs.txt")
        marker.write_text(marker.read_text() + "x" if marker.exists() else "x")
        pathlib.Path("data/extra.txt").write_text("made here")
    """)
        },
    )
    bench = _bench(tmp_path / "b", "dl")
    prepare_data(bench)
    prepare_data(bench)
    assert (bench.work_dir() / "runs.txt").read_text() == "x"
    assert not (folder / "runs.txt").exists()  # the user's folder is left alone


def test_third_party_evaluate_is_contained(tmp_path: Path) -> None:
    cases = {
        "raises": "def evaluate(q, a, r, **k):\n    raise RuntimeError('boom')\n",
        "hangs": "import time\ndef evaluate(q, a, r, **k):\n    time.sleep(60)\n",
        "garbage": "print('garbage on import {]')\ndef evaluate(q, a, r, **k):\n    print('noise', q)\n    return 1.0\n",
        "out_of_range": "def evaluate(q, a, r, **k):\n    return 7\n",
        "exits": "import os\ndef evaluate(q, a, r, **k):\n    os._exit(1)\n",
        "broken_import": "import not_a_module\ndef evaluate(q, a, r, **k):\n    return 1.0\n",
    }
    reqs = [Request("q1", "a", "a"), Request("q2", "b", "b")]
    results = {}
    for name, source in cases.items():
        (tmp_path / name).mkdir()
        (tmp_path / name / "eval.py").write_text(source)
        results[name] = score_all(tmp_path / name, reqs, timeout_s=2.0)
    assert [r.score for r in results["raises"]] == [0.0, 0.0] and "boom" in (results["raises"][0].error or "")
    assert [r.score for r in results["hangs"]] == [0.0, 0.0] and "did not answer" in (results["hangs"][0].error or "")
    assert [r.score for r in results["garbage"]] == [1.0, 1.0]
    assert "not a number in [0, 1]" in (results["out_of_range"][0].error or "")
    assert all(r.score == 0.0 and r.error for r in results["exits"])
    assert "failed to load" in (results["broken_import"][0].error or "")


def test_tiny_model_eval_end_to_end(tmp_path: Path, home: Path) -> None:
    pytest.importorskip("torch", reason="the tiny-model run needs the hf backend (autorl[hf])")
    root = tmp_path / "benchmarks"
    make_folder(root, "boolexpr")
    proc = cli(
        "eval",
        "--task",
        "smith-boolexpr",
        "--model",
        "autorl:tiny",
        "--limit",
        "4",
        "--json",
        env={"SMITH_BENCH_DIR": str(root), "AUTORL_HOME": str(home)},
    )
    assert proc.returncode == 0, proc.stderr
    record = json.loads(proc.stdout)
    assert record["benchmark"] == "smith-boolexpr" and record["n"] == 4


def test_opencompass_without_its_environment_is_one_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    from autorl_smith.opencompass import interpreter

    from autorl import EvaluationError

    monkeypatch.delenv("AUTORL_OPENCOMPASS_PYTHON", raising=False)
    with pytest.raises(EvaluationError, match="AUTORL_OPENCOMPASS_PYTHON"):
        interpreter({})
    monkeypatch.setenv("AUTORL_OPENCOMPASS_PYTHON", sys.executable)
    if subprocess.run([sys.executable, "-c", "import opencompass"], capture_output=True).returncode != 0:
        with pytest.raises(EvaluationError, match="cannot import opencompass"):
            interpreter({})


def test_opencompass_results_are_read_with_suspicion(tmp_path: Path) -> None:
    from autorl_smith.opencompass import read_results

    from autorl import EvaluationError

    with pytest.raises(EvaluationError, match="wrote 0 result file"):
        read_results(tmp_path, 1)
    out = tmp_path / "20260101_000000" / "results" / "submission"
    out.mkdir(parents=True)
    (out / "bbh-boolean_expressions.json").write_text(
        json.dumps({"accuracy": 50.0, "details": {"0": {"correct": True}, "1": {"correct": False}}})
    )
    assert read_results(tmp_path, 1) == [("bbh-boolean_expressions", 50.0, [1.0, 0.0])]
    with pytest.raises(EvaluationError, match="for 2 dataset"):
        read_results(tmp_path, 2)


def test_opencompass_acc_evaluator_details_leave_the_accuracy(tmp_path: Path) -> None:
    """What OpenCompass 0.5.4's AccEvaluator wrote for a local custom dataset: numbered items with prediction and
    reference but no verdict, and a "type" entry; none of them is an item scored 0."""
    from autorl_smith.opencompass import config_source, read_results

    out = tmp_path / "20261205_062823" / "results" / "submission"
    out.mkdir(parents=True)
    details = {
        "type": "GEN",
        **{
            str(k): {
                "prompt": f"What is {k}+1?",
                "origin_prediction": str(k + 1),
                "predictions": str(k + 1),
                "references": str(k + 1),
            }
            for k in range(3)
        },
    }
    (out / "add.json").write_text(json.dumps({"accuracy": 100.0, "details": details}))
    assert read_results(tmp_path, 1) == [("add", 100.0, None)]
    details = {"type": "GEN", "0": {"correct": True}, "1": {"correct": [False]}}
    (out / "add.json").write_text(json.dumps({"accuracy": 50.0, "details": details}))
    assert read_results(tmp_path, 1) == [("add", 50.0, [1.0, 0.0])]
    assert "run_cfg=dict(num_gpus=0)" in config_source({"path": "/d.jsonl"}, "/model", 8, 4, num_gpus=0)


ARITH = [{"question": f"What is {a}+{b}?", "answer": str(a + b)} for a in range(6) for b in range(5)]


def _dataset_of(config_py: Path) -> dict:  # type: ignore[type-arg]
    """The custom dataset's options, read from the config OpenCompass is given (without importing it)."""
    call = next(
        n.value
        for n in ast.parse(config_py.read_text()).body
        if isinstance(n, ast.Assign) and ast.unparse(n.targets[0]) == "datasets"
    )
    (entry,) = call.elts
    assert [k.arg for k in entry.keywords] == ["evaluator", None]
    return ast.literal_eval(entry.keywords[1].value)  # type: ignore[no-any-return]


def test_opencompass_mode_gives_opencompass_the_given_items_and_only_they(tmp_path: Path, home: Path) -> None:
    """The grader's hidden items (drawn with the secret) are what OpenCompass scores, as its local custom dataset
    in a private folder: not the folder's eval file, not items it was not given."""
    from autorl_smith.opencompass import prepare_run

    from autorl.resources import prepare_data

    test_rows = [{"question": f"What is {k}+100?", "answer": str(k + 100)} for k in range(20)]
    make_folder(
        tmp_path / "b",
        "ocarith",
        rows=ARITH,
        test_rows=test_rows,
        config={"eval_mode": "opencompass", "prompt_template": "Q: {question}\nA:"},
    )
    bench = _bench(tmp_path / "b", "ocarith")
    data = prepare_data(bench)
    items = bench.load_items("test", data.hidden_dir)[:4]
    private, work = tmp_path / "private", tmp_path / "work"
    private.mkdir()
    command = prepare_run(bench, items, "/models/submission", private, work)
    assert command[:2] == ["-m", "opencompass.cli.main"] and command[3:] == ["-w", str(work)]
    config_py = Path(command[2])
    assert config_py.parent == private
    dataset = _dataset_of(config_py)
    # no "type": OpenCompass fills it in as a local custom dataset, read from the file named here
    assert {"type", "reader_cfg", "infer_cfg"}.isdisjoint(dataset)
    assert (dataset["data_type"], dataset["infer_method"], dataset["human_prompt"]) == (
        "qa",
        "gen",
        "Q: {question}\nA:",
    )
    assert Path(dataset["path"]).parent == private and not Path(dataset["meta_path"]).exists()
    rows = [json.loads(line) for line in Path(dataset["path"]).read_text().splitlines()]
    assert rows == [{"question": i.input["question"], "answer": [i.reference]} for i in items]
    assert len({r["question"] for r in rows}) == 4 and all(
        r in [*test_rows] for r in ({"question": r["question"], "answer": r["answer"][0]} for r in rows)
    )
    text = config_py.read_text()
    assert str(tmp_path / "b") not in text and "test.jsonl" not in text and "read_base" not in text
    assert "path='/models/submission'" in text


def test_opencompass_mode_refuses_a_named_dataset(tmp_path: Path, home: Path) -> None:
    """A folder that names an OpenCompass dataset would score OpenCompass's items, not the hidden split: refused
    in one line, by validation and by the evaluator."""
    from autorl_smith.opencompass import dataset_meta
    from autorl_smith.validate import validate

    from autorl import EvaluationError

    folder = make_folder(
        tmp_path / "b",
        "ocbbh",
        rows=ARITH,
        extra={"description.md": "# sums\n"},
        config={"eval_mode": "opencompass", "opencompass_dataset": "opencompass.configs.datasets.bbh.bbh_gen"},
    )
    problems = validate(folder)
    assert any("opencompass_dataset must be a mapping" in p for p in problems), problems
    with pytest.raises(EvaluationError, match="a named OpenCompass dataset is not read"):
        dataset_meta("d", tmp_path / "d.jsonl", {"opencompass_dataset": "opencompass.configs.datasets.bbh.bbh_gen"})
    with pytest.raises(EvaluationError, match="must be a mapping"):
        dataset_meta("d", tmp_path / "d.jsonl", {"opencompass_dataset": {"path": "/elsewhere.jsonl"}})
    meta = dataset_meta("d", tmp_path / "d.jsonl", {"opencompass_dataset": {"bot_prompt": "{answer}"}})
    assert meta["path"] == str(tmp_path / "d.jsonl") and meta["bot_prompt"] == "{answer}"


@pytest.mark.opencompass
def test_opencompass_mode_agrees_with_per_sample(tmp_path: Path, home: Path, tiny_model: Path) -> None:
    """A real OpenCompass (``nox -s opencompass``) and ``per_sample`` score the same hidden items of one folder
    with the same model: the verdicts agree item by item."""
    import dataclasses

    from autorl.evaluation.run import evaluate_model
    from autorl.plugins.registry import get_backend
    from autorl.resources import prepare_data

    if not os.environ.get("AUTORL_OPENCOMPASS_PYTHON"):
        pytest.fail("needs an OpenCompass environment in AUTORL_OPENCOMPASS_PYTHON (nox -s opencompass makes one)")
    from autorl.builtin.arith import public_pairs

    # problems the tiny model was trained on, so that it gets some right: agreement is not all zeros
    test_rows = [{"question": f"What is {a}+{b}?", "answer": str(a + b)} for a, b in public_pairs("train")[:48]]
    make_folder(
        tmp_path / "b",
        "arith",
        rows=ARITH,
        test_rows=test_rows,
        config={"prompt_template": "Q: {question}\nA:", "max_new_tokens": 6, "stop": ["\n"]},
    )
    per_sample = _bench(tmp_path / "b", "arith")
    oc = type("OC", (type(per_sample),), {"folder": dataclasses.replace(per_sample.folder, eval_mode="opencompass")})()
    records = {}
    for label, bench in (("per_sample", per_sample), ("opencompass", oc)):
        data = prepare_data(bench)
        out = tmp_path / f"{label}.jsonl"
        evaluate_model(
            bench, get_backend("hf")(), tiny_model, split="test", hidden_dir=data.hidden_dir, per_item_path=out
        )
        records[label] = {r["id"]: r for r in map(json.loads, out.read_text().splitlines())}
    assert records["per_sample"].keys() == records["opencompass"].keys() and len(records["opencompass"]) == 24
    scores = {k: (r["score"], records["opencompass"][k]["score"]) for k, r in records["per_sample"].items()}
    print("per item (per_sample, opencompass):", scores)
    assert all(a == b for a, b in scores.values()), scores
    assert 0 < sum(a for a, _ in scores.values()) < len(scores)
    # the same greedy text, OpenCompass's prediction up to the stop against per_sample's completion, but for
    # an odd item: both decode in batches of padded prompts, and a near-tie between two digits can tip either way
    (predictions,) = home.glob("hidden/smith/*/opencompass/*/*/predictions/submission/*.json")
    said = [d["prediction"] for _, d in sorted((int(k), d) for k, d in json.loads(predictions.read_text()).items())]
    texts = list(
        zip(
            (s.split("\n")[0] for s in said), (r["completions"][0] for r in records["per_sample"].values()), strict=True
        )
    )
    differ = [(k, a, b) for k, (a, b) in enumerate(texts) if a != b]
    print("texts that differ (item, opencompass, per_sample):", differ)
    assert len(differ) <= len(texts) // 10, differ
