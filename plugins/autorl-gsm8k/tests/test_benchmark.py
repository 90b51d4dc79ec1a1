"""GSM8K data, splits and scoring on fixtures in the official formats; a tiny-model eval end to end."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from autorl_gsm8k.benchmark import GSM8K

from autorl import ResourceError


def official_rows(n: int, offset: int = 0) -> list[dict[str, str]]:
    return [
        {
            "question": f"Tom has {k} apples and buys {k + 1} more. How many apples does he have?",
            "answer": f"Tom has {k} + {k + 1} = <<{k}+{k + 1}={2 * k + 1}>>{2 * k + 1} apples.\n#### {2 * k + 1}",
        }
        for k in range(offset, offset + n)
    ]


def write_parquet(path: Path, rows: list[dict[str, str]]) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.Table.from_pylist(rows), path)


@pytest.fixture(params=["jsonl", "parquet"])
def mirror(request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    root = tmp_path / "mirror"
    train, test = official_rows(40), official_rows(12, offset=1000)
    if request.param == "jsonl":
        (root / "gsm8k").mkdir(parents=True)
        (root / "gsm8k" / "train.jsonl").write_text("".join(json.dumps(r) + "\n" for r in train))
        (root / "gsm8k" / "test.jsonl").write_text("".join(json.dumps(r) + "\n" for r in test))
    else:
        write_parquet(root / "gsm8k" / "main" / "train-00000-of-00001.parquet", train)
        write_parquet(root / "gsm8k" / "main" / "test-00000-of-00001.parquet", test)
    monkeypatch.setenv("AUTORL_DATA_DIR", str(root))
    monkeypatch.setenv("AUTORL_HOME", str(tmp_path / "home"))
    return root


def test_splits_hide_dev_and_test_from_the_agent(mirror: Path, tmp_path: Path) -> None:
    from autorl.resources import prepare_data

    bench = GSM8K()
    data = prepare_data(bench)
    train = [json.loads(x) for x in (data.train_dir / "train.jsonl").read_text().splitlines()]
    dev, test = bench.load_items("dev", data.hidden_dir), bench.load_items("test", data.hidden_dir)
    assert len(train) == 32 and len(dev) == 8 and len(test) == 12
    train_questions = {r["question"] for r in train}
    assert not train_questions & {i.input["question"] for i in dev + test}
    assert {"question", "answer"} == set(train[0])
    assert test[0].reference == "2001" and test[0].input["question"].startswith("Tom has 1000")
    # the same slice every time
    assert [i.id for i in GSM8K().load_items("dev", data.hidden_dir)] == [i.id for i in dev]
    # nothing hidden is reachable from the agent's data folder
    assert sorted(p.name for p in data.train_dir.iterdir()) == ["train.jsonl"]


def test_scoring(mirror: Path) -> None:
    from autorl.resources import prepare_data

    bench = GSM8K()
    item = bench.load_items("test", prepare_data(bench).hidden_dir)[0]
    assert bench.score(item, " Tom has 1000 + 1001 = 2001 apples. The answer is 2001.") == 1.0
    assert bench.score(item, " The answer is 2,001.") == 1.0
    assert bench.score(item, " The answer is 2000.") == 0.0
    # the training data's full solutions work as references too (agents reuse score as a reward)
    from autorl import Item

    assert bench.score(Item("t", {}, official_rows(1)[0]["answer"]), " The answer is 1.") == 1.0


def test_prompt_is_eight_shot_chain_of_thought() -> None:
    prompt = GSM8K().config().render({"question": "What is 2 + 2?"})
    assert isinstance(prompt, str)
    assert prompt.count("Q: ") == 9 and prompt.endswith("Q: What is 2 + 2?\nA:")
    assert "The answer is 6.\n\nQ: If there are 3 cars" in prompt


def test_offline_without_mirror_is_one_clear_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AUTORL_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.delenv("AUTORL_DATA_DIR", raising=False)
    with pytest.raises(ResourceError, match=r"AUTORL_DATA_DIR.*data_dir"):
        GSM8K().prepare_train_data(tmp_path / "train")


def test_hub_download_path_uses_the_hub_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The real hub code path, served from a cache laid out exactly as huggingface_hub leaves it."""
    home = tmp_path / "home"
    cache = home / "hidden" / "gsm8k" / "raw" / "hub" / "datasets--openai--gsm8k"
    revision = "e53f048856ff4f594e959d75785d2c2d37b678ee"
    (cache / "refs").mkdir(parents=True)
    (cache / "refs" / "main").write_text(revision)
    snapshot = cache / "snapshots" / revision
    write_parquet(snapshot / "main" / "train-00000-of-00001.parquet", official_rows(25))
    write_parquet(snapshot / "main" / "test-00000-of-00001.parquet", official_rows(7, offset=500))
    monkeypatch.setenv("AUTORL_HOME", str(home))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.delenv("AUTORL_DATA_DIR", raising=False)
    from autorl.resources import prepare_data

    data = prepare_data(GSM8K())
    assert len(GSM8K().load_items("test", data.hidden_dir)) == 7
    assert len((data.train_dir / "train.jsonl").read_text().splitlines()) == 20


def test_tiny_model_eval_end_to_end(mirror: Path, tmp_path: Path) -> None:
    pytest.importorskip("torch", reason="the tiny-model run needs the hf backend (autorl[hf])")
    env = {**os.environ, "AUTORL_HOME": os.environ["AUTORL_HOME"]}
    proc = subprocess.run(
        [
            sys.executable,
            "-c",
            "from autorl.cli import main; main()",
            "eval",
            "--task",
            "gsm8k",
            "--model",
            "autorl:tiny",
            "--limit",
            "3",
            "--json",
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=900,
    )
    assert proc.returncode == 0, proc.stderr
    record = json.loads(proc.stdout)
    assert record["n"] == 3 and record["benchmark"] == "gsm8k" and 0.0 <= record["score"] <= 100.0


def test_hidden_items_contract(mirror: Path, tmp_path: Path) -> None:
    from autorl.testing import check_hidden_items_secret

    check_hidden_items_secret(GSM8K(), tmp_path / "contract")


def test_hardening_checks(mirror: Path, tmp_path: Path) -> None:
    from autorl.testing import check_hardening

    check_hardening(GSM8K, tmp_path)


def test_agent_data_leaves_out_the_secret_dev_slice(mirror: Path, tmp_path: Path) -> None:
    """Each installation's dev slice is another part of the train split, and its agents never get it."""
    seen = []
    for name in ("one", "two"):
        bench = GSM8K()
        bench.hidden_dir = tmp_path / name / "hidden"
        bench.prepare_eval_data(bench.hidden_dir)
        bench.prepare_train_data(tmp_path / name / "train")
        train = {
            json.loads(x)["question"] for x in (tmp_path / name / "train" / "train.jsonl").read_text().splitlines()
        }
        dev = {str(i.input["question"]) for i in bench.load_items("dev", bench.hidden_dir)}
        assert len(train) == 32 and len(dev) == 8 and not train & dev
        seen.append(dev)
    assert seen[0] != seen[1]


def test_ids_are_content_based(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The same problems in another order keep their ids; a changed problem gets another id."""
    monkeypatch.delenv("AUTORL_DATA_DIR", raising=False)
    train, test = official_rows(40), official_rows(12, offset=1000)
    ids = []
    for name, test_rows in (("a", test), ("b", test[::-1]), ("c", [{**test[0], "question": "Changed?"}, *test[1:]])):
        folder = tmp_path / name
        (folder / "mirror").mkdir(parents=True)
        train_rows = train[::-1] if name == "b" else train
        (folder / "mirror" / "train.jsonl").write_text("".join(json.dumps(r) + "\n" for r in train_rows))
        (folder / "mirror" / "test.jsonl").write_text("".join(json.dumps(r) + "\n" for r in test_rows))
        bench = GSM8K({"data_dir": str(folder / "mirror"), "raw_dir": str(folder / "raw")})
        bench.prepare_eval_data(folder / "hidden")
        ids.append(
            {s: {i.id: i.input["question"] for i in bench.load_items(s, folder / "hidden")} for s in ("dev", "test")}
        )
    assert ids[0]["test"] == ids[1]["test"]  # order does not matter
    assert len(set(ids[0]["test"]) & set(ids[2]["test"])) == 11  # the changed problem has a new id
    assert all(i.startswith("test-") for i in ids[0]["test"]) and all(i.startswith("dev-") for i in ids[0]["dev"])


def test_a_given_mirror_wins_over_the_cached_copy_and_moves_the_hash(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from autorl.evaluation.identity import config_hash
    from autorl.testing import PolicyBackend

    monkeypatch.delenv("AUTORL_DATA_DIR", raising=False)
    raw = tmp_path / "raw"  # what an earlier hub download left
    raw.mkdir()
    (raw / "train.jsonl").write_text("".join(json.dumps(r) + "\n" for r in official_rows(40)))
    (raw / "test.jsonl").write_text("".join(json.dumps(r) + "\n" for r in official_rows(12, offset=1000)))
    hidden = tmp_path / "hidden"
    backend = PolicyBackend(lambda _p: "")
    cached = GSM8K({"raw_dir": str(raw)})
    cached.prepare_eval_data(hidden)
    hashes = {config_hash(cached, "test", backend, hidden)}
    mirror = tmp_path / "mirror"
    mirror.mkdir()
    (mirror / "train.jsonl").write_text("".join(json.dumps(r) + "\n" for r in official_rows(40)))
    for k, rows in enumerate(
        (official_rows(12, offset=5000), [*official_rows(11, offset=5000), official_rows(1, 9)[0]])
    ):
        (mirror / "test.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
        bench = GSM8K({"raw_dir": str(raw), "data_dir": str(mirror)})
        bench.prepare_eval_data(hidden)
        items = bench.load_items("test", hidden)
        assert [i.input["question"] for i in items] == [r["question"] for r in rows], k
        hashes.add(config_hash(bench, "test", backend, hidden))
    assert len(hashes) == 3  # the cached copy, the mirror, the mirror with one problem changed


def test_audit_says_what_dev_overlap_proves_here(mirror: Path, tmp_path: Path) -> None:
    """GSM8K's dev problems are in the public train split: their presence is no proof of a leak."""
    from autorl.audit import CRITICAL, check_overlap
    from autorl.resources import prepare_data

    bench = GSM8K()
    data = prepare_data(bench)
    hidden = {s: bench.load_items(s, data.hidden_dir) for s in bench.splits}
    workspace = tmp_path / "workspace"
    workspace.mkdir()
    (workspace / "copied.txt").write_text(str(hidden["dev"][0].input["question"]) + "\n")
    [flag] = check_overlap(workspace, hidden, dev_public=GSM8K.dev_public)
    assert flag.name == "dev-items-in-workspace" and flag.severity != CRITICAL
    assert "public train data" in flag.detail and "not that the hidden split leaked" in flag.detail
    [strict] = check_overlap(workspace, hidden)
    assert strict.severity == CRITICAL
