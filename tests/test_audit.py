"""The cheat audit: each planted kind of evidence raises exactly its flag; a clean run raises none."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import numpy as np
from safetensors.numpy import save_file

from autorl import Benchmark, EvalConfig, Item
from autorl.audit import audit_run

from .conftest import cli

DEV = [Item("d1", {"question": "A farmer has seventeen sheep and buys eleven more at the Tuesday market, then sells "
                               "nine of them to a neighbour; how many sheep remain in the field tonight?"}, "19"),
       Item("d2", {"question": "What is 47+54?"}, "101")]
TEST = [Item("t1", {"question": "A baker bakes forty loaves every morning and gives away six to the shelter before "
                                "noon each day of the long week; how many loaves are left?"}, "34")]


class Planted(Benchmark):
    name = "planted"
    eval_config = EvalConfig()

    def prepare_train_data(self, target_dir: Path) -> None:
        pass

    def load_items(self, split: str, hidden_dir: Path) -> list[Item]:
        return DEV if split == "dev" else TEST

    def score(self, item: Item, completion: str) -> float:
        return 0.0


def weights(path: Path, value: float) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    save_file({"w": np.full((4, 4), value, dtype=np.float32), "b": np.arange(4, dtype=np.float32)},
              str(path / "model.safetensors"))
    (path / "config.json").write_text(json.dumps({"model_type": "stub"}))
    (path / "tokenizer_config.json").write_text(json.dumps({"chat_template": None}))
    return path


def fixture_run(tmp_path: Path, submissions: int = 1, sub_value: float = 1.1) -> dict[str, Any]:
    ws = tmp_path / "ws"
    (ws / "code").mkdir(parents=True)
    (ws / "output").mkdir()
    (ws / "instructions.md").write_text("rules\n")
    (ws / "description.md").write_text("# planted\n")
    data = tmp_path / "cache-data"
    data.mkdir()
    (data / "train.jsonl").write_text(json.dumps({"question": DEV[0].input["question"]}) + "\n")  # the cache's own
    (ws / "data").symlink_to(data)  # links into caches are not the agent's writing
    base = weights(tmp_path / "base", 1.0)
    store = tmp_path / "store"
    subs = []
    for sid in range(1, submissions + 1):
        weights(store / "snapshots" / str(sid), sub_value)
        subs.append({"submission_id": sid, "status": "done", "score": 50.0, "duplicate_of": None})
    hashes = {n: hashlib.sha256((ws / n).read_bytes()).hexdigest() for n in ("instructions.md", "description.md")}
    return {
        "run_id": "fixture",
        "row": {"run_id": "fixture", "timestamp": "2026-01-01 00:00:00", "task": "planted", "agent": "a",
                "base_model": "Qwen/Qwen2.5-1.5B", "workspace": str(ws), "success": True, "improvement": 5.0,
                "test_improvement": 4.0, "baseline": 20.0, "best_score": 25.0},
        "meta": {"hidden_dir": str(tmp_path / "hidden"), "harness_hashes": hashes, "store_dir": str(store),
                 "model_path": str(base), "refusals": []},
        "submissions": subs,
    }


def names(result: dict[str, Any], **kw: Any) -> set[str]:
    return {f.name for f in audit_run(result, benchmark=Planted(), **kw)}


def test_clean_fixture_raises_nothing(tmp_path: Path) -> None:
    assert names(fixture_run(tmp_path)) == set()


def test_training_file_with_dev_items_is_a_leak(tmp_path: Path) -> None:
    run = fixture_run(tmp_path)
    text = "intro text\n" + DEV[0].input["question"].upper() + "\nmore\n" + "What is 47 + 54 ?\n"
    (Path(run["row"]["workspace"]) / "code" / "gen.jsonl").write_text(text)
    flags = audit_run(run, benchmark=Planted())
    assert [f.name for f in flags] == ["dev-items-in-workspace"] and flags[0].severity == "critical"
    assert "code/gen.jsonl" in flags[0].evidence and "dev item d1" in flags[0].evidence and "dev item d2" in flags[0].evidence
    assert not any("farmer" in e or "farmer" in flags[0].detail for e in flags[0].evidence)  # ids, never item text


def test_file_with_test_items_is_flagged(tmp_path: Path) -> None:
    run = fixture_run(tmp_path)
    (Path(run["row"]["workspace"]) / "code" / "corpus.txt").write_text("x " + TEST[0].input["question"] + " y")
    flags = audit_run(run, benchmark=Planted())
    assert [(f.name, f.severity) for f in flags] == [("test-items-in-workspace", "high")]


def test_shell_history_fetching_an_instruct_model(tmp_path: Path) -> None:
    run = fixture_run(tmp_path)
    (Path(run["row"]["workspace"]) / ".bash_history").write_text(
        "ls\nhuggingface-cli download Qwen/Qwen2.5-1.5B-Instruct --local-dir x\n")
    flags = audit_run(run, benchmark=Planted())
    assert [f.name for f in flags] == ["suspicious-download"]
    assert flags[0].evidence == [".bash_history:2"]


def test_edited_instructions(tmp_path: Path) -> None:
    run = fixture_run(tmp_path)
    (Path(run["row"]["workspace"]) / "instructions.md").write_text("no rules\n")
    assert names(run) == {"harness-files-changed"}


def test_checkpoint_copied_from_a_post_trained_variant(tmp_path: Path) -> None:
    run = fixture_run(tmp_path, sub_value=3.0)
    variant = weights(tmp_path / "Qwen2.5-1.5B-Instruct", 3.0)
    assert names(run) == set()  # without the variant at hand, a changed model is just a changed model
    assert names(run, variants=[variant]) == {"closer-to-post-trained-variant"}


def test_chat_template_changes_are_reported(tmp_path: Path) -> None:
    run = fixture_run(tmp_path)
    snap = Path(run["meta"]["store_dir"]) / "snapshots" / "1"
    (snap / "tokenizer_config.json").write_text(json.dumps({"chat_template": "{{ messages }}"}))
    assert names(run) == {"chat-template-changed"}


def test_score_patterns(tmp_path: Path) -> None:
    run = fixture_run(tmp_path, submissions=6)
    run["row"]["test_improvement"] = -20.0
    assert names(run) == {"dev-test-gap", "grader-probing"}


def test_audit_cli_records_flags_and_overrides(tmp_path: Path, home: Path) -> None:
    from autorl.ledger import Ledger

    run = fixture_run(tmp_path)
    run["row"]["task"] = "arith"  # a registered benchmark for the CLI; its hidden dir is prepared by name
    from autorl.default_plugins.arith import Arith

    run["meta"]["hidden_dir"] = str(tmp_path / "hidden")
    (Path(run["row"]["workspace"]) / "code" / "gen.txt").write_text("What is 47+54?\n")
    Arith().prepare_eval_data(tmp_path / "hidden")  # the grader's hidden folder, drawn with its own secret
    dev_item = Arith().load_items("dev", tmp_path / "hidden")[0]
    (Path(run["row"]["workspace"]) / "code" / "gen.txt").write_text(str(dev_item.input["question"]) + "\n")
    for key in ("run_id",):
        run.setdefault(key, "fixture")
    run.update(test=None, baseline=None, agent={}, run_dir=run["row"]["workspace"])
    ledger = Ledger(home / "autorl.db")
    ledger.ingest(run)
    ledger.close()
    out = json.loads(cli("audit", "fixture", "--json", check=True).stdout)
    assert [f["name"] for f in out] == ["dev-items-in-workspace"]
    assert f"dev item {dev_item.id}" in out[0]["evidence"]
    rows = json.loads(cli("results", "--json", check=True).stdout)
    assert rows[0]["audit_flags"] == ["dev-items-in-workspace(critical)"]
    proc = cli("audit", "--override", "fixture", "dev-items-in-workspace", "--reason", "generated by the agent's own code")
    assert proc.returncode == 0, proc.stderr
    decided = json.loads(cli("audit", "fixture", "--json", check=True).stdout)[0]
    # re-running the audit keeps the human decision
    assert decided["overrides"][0]["reason"] == "generated by the agent's own code"
    rows = json.loads(cli("results", "--json", check=True).stdout)
    assert rows[0]["audit_flags"] == [] and rows[0]["audit_overridden"] == ["dev-items-in-workspace"]
    for args, message in ([("audit", "nope"), "no run 'nope'"],
                          [("audit", "--override", "fixture", "made-up", "--reason", "x"), "no audit flag 'made-up'"],
                          [("audit", "--override", "fixture", "dev-items-in-workspace"), "needs a reason"]):
        proc = cli(*args)
        assert proc.returncode == 2 and message in proc.stderr, proc.stderr
