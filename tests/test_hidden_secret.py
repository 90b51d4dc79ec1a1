"""Hidden items exist only in the grader's hidden folder, drawn with the installation's secret: the secret
file, the operator's AUTORL_HIDDEN_SECRET, the config hash over the hidden items, and an agent in the sandbox
that tries to rebuild arith's hidden splits from the installed package."""

from __future__ import annotations

import json
import os
import re
import stat
import threading
from pathlib import Path

import pytest

from autorl.builtin.arith import Arith, public_pairs
from autorl.errors import HiddenDataError, UsageError
from autorl.evaluation.identity import config_hash
from autorl.hidden import HIDDEN_SECRET_ENV, hidden_secret, items_digest, secret_rng
from autorl.testing import PolicyBackend, check_hidden_items_secret

from .conftest import ROOT, cli, write_stub_checkpoint
from .test_sandbox import needs_bwrap

HOSTILE = Path(__file__).with_name("hostile")


@pytest.fixture(autouse=True)
def _no_operator_secret(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(HIDDEN_SECRET_ENV, raising=False)


def test_secret_is_created_once_owner_only_and_race_safe(tmp_path: Path) -> None:
    folder = tmp_path / "hidden"
    got: list[bytes] = []
    threads = [threading.Thread(target=lambda: got.append(hidden_secret(folder))) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(set(got)) == 1 and len(got[0]) == 32  # every concurrent first use got the one secret
    assert stat.S_IMODE((folder / "secret").stat().st_mode) == 0o600
    assert sorted(p.name for p in folder.iterdir()) == ["secret"]  # no temp file left behind
    assert hidden_secret(folder) == got[0]
    assert hidden_secret(tmp_path / "other") != got[0]


def test_secret_rng_depends_on_secret_and_purpose(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    draw = [secret_rng(f, p).random() for f in (a, b) for p in ("x", "y")]
    assert len(set(draw)) == 4
    assert secret_rng(a, "x").random() == draw[0]
    monkeypatch.setenv(HIDDEN_SECRET_ENV, "01" * 32)
    assert secret_rng(a, "x").random() == secret_rng(b, "x").random()  # the operator's secret, anywhere


@pytest.mark.parametrize("bad", ["not hex", "abcd"])
def test_a_bad_operator_secret_is_one_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, bad: str) -> None:
    monkeypatch.setenv(HIDDEN_SECRET_ENV, bad)
    with pytest.raises(UsageError, match=HIDDEN_SECRET_ENV) as info:
        hidden_secret(tmp_path)
    assert "\n" not in str(info.value)


def test_a_planted_secret_link_or_odd_file_is_refused(tmp_path: Path) -> None:
    (tmp_path / "elsewhere").write_bytes(b"x" * 32)
    link = tmp_path / "linked"
    link.mkdir()
    (link / "secret").symlink_to(tmp_path / "elsewhere")
    with pytest.raises(HiddenDataError):
        hidden_secret(link)
    short = tmp_path / "short"
    short.mkdir()
    (short / "secret").write_bytes(b"abc")
    with pytest.raises(HiddenDataError, match="32-byte"):
        hidden_secret(short)


def test_arith_keeps_the_contract(tmp_path: Path) -> None:
    check_hidden_items_secret(Arith(), tmp_path)


def test_arith_hidden_items_are_not_the_complement_of_train(tmp_path: Path) -> None:
    bench = Arith()
    bench.prepare_train_data(tmp_path / "train")
    bench.prepare_eval_data(tmp_path / "hidden")
    train = {json.loads(x)["question"] for x in (tmp_path / "train" / "train.jsonl").read_text().splitlines()}
    hidden = {str(i.input["question"]) for s in ("dev", "test") for i in bench.load_items(s, tmp_path / "hidden")}
    assert len(hidden) == 800 and not hidden & train
    assert len(public_pairs("pool")) == 2000 and len(train) == 6100  # 1,200 held-out pairs are in no split


def test_load_items_without_the_hidden_folder_is_one_line_through_the_cli(tmp_path: Path) -> None:
    """`autorl audit` and the grader read hidden items; a folder without them is a one-line error."""
    with pytest.raises(HiddenDataError) as info:
        Arith().load_items("test", tmp_path)
    assert "\n" not in str(info.value) and "arith" in str(info.value)


def test_config_hash_covers_the_hidden_items(tmp_path: Path) -> None:
    be = PolicyBackend(lambda _p: "")
    bench = Arith()
    hashes = set()
    for name in ("a", "b"):
        bench.prepare_eval_data(tmp_path / name)
        hashes.add(config_hash(bench, "dev", be, tmp_path / name))
    assert len(hashes) == 2  # two secrets: never paired or pooled
    assert config_hash(bench, "dev", be, tmp_path / "a") == config_hash(Arith(), "dev", be, tmp_path / "a")
    # the same items copied elsewhere hash the same; one changed item moves the hash
    items = bench.load_items("dev", tmp_path / "a")
    assert items_digest(items) == bench.hidden_items_hash("dev", tmp_path / "a")
    assert items_digest([*items[:-1], type(items[-1])(items[-1].id, items[-1].input, "0")]) != items_digest(items)


def test_a_cached_baseline_is_not_reused_under_another_secret(tmp_path: Path, tiny_model: Path) -> None:
    from autorl.grader.worker import run_job

    cache = tmp_path / "baselines"
    job = {
        "task": "arith",
        "backend": "hf",
        "split": "dev",
        "base_model_dir": str(tiny_model),
        "limit": 4,
        "cache_dir": str(cache),
    }
    first = run_job({**job, "hidden_dir": str(tmp_path / "a")})
    again = run_job({**job, "hidden_dir": str(tmp_path / "a")})
    other = run_job({**job, "hidden_dir": str(tmp_path / "b")})
    assert again["extra"].get("cached") and not other["extra"].get("cached")
    assert first["config_hash"] == again["config_hash"] != other["config_hash"]
    assert set(first["item_scores"]) != set(other["item_scores"])


@needs_bwrap
def test_an_agent_in_the_sandbox_gets_no_hidden_item(tmp_path: Path) -> None:
    home = tmp_path / "autorl-home"
    hidden = home / "hidden" / "arith"
    base = write_stub_checkpoint(tmp_path / "stub-base", {})
    attack = {"tests_root": str(ROOT), "hidden": str(hidden), "home": str(home)}
    proc = cli(
        "run",
        "--agent",
        str(HOSTILE / "hidden_items"),
        "--task",
        "arith",
        "--model",
        str(base),
        "--timeout",
        "120",
        "--backend",
        "scripted",
        "--sandbox",
        "bwrap",
        "--network",
        "off",
        "--json",
        "--agent-env",
        "ATTACK=" + json.dumps(attack),
        env={"AUTORL_HOME": str(home)},
    )
    assert proc.returncode == 0, proc.stderr
    ws = Path(json.loads(proc.stdout)["workspace"])
    attempts = json.loads((ws / "code" / "attempts.json").read_text())
    real = {s: Arith().load_items(s, hidden) for s in ("dev", "test")}
    real_questions = {s: {str(i.input["question"]) for i in real[s]} for s in real}
    assert len(attempts) == 14
    by_label = {a["label"]: a for a in attempts}
    for split in ("dev", "test"):  # the grader's folder is not there: a one-line error, nothing read
        a = by_label[f"load_items {split} {hidden}"]
        assert not a["ok"] and "HiddenDataError" in a["error"] and "\n" not in a["error"], a
    got_something = [a for a in attempts if a["ok"]]
    assert {a["label"] for a in got_something} >= {
        "prepare and load dev in a fresh folder",
        "autorl eval test with its own AUTORL_HOME",
    }
    for a in got_something:
        # what it built is another installation's draw from the same public pool of held-out pairs: it
        # meets the real split only by chance (about 15% of dev, 25% of test), never as the split itself
        for split, questions in real_questions.items():
            shared = questions & set(a["questions"])
            assert len(shared) < 0.5 * len(questions), (a["label"], split, len(shared))
        assert set(a["ids"]) != {i.id for i in real["test"]} and set(a["ids"]) != {i.id for i in real["dev"]}
    # and nothing the agent wrote (its code folder, its own AUTORL_HOME there) holds the real split either
    written = set(
        re.findall(
            r"(?:dev|test)-\d+\+\d+",
            "\n".join(
                p.read_text(errors="ignore") for p in (ws / "code").rglob("*") if p.is_file() and not p.is_symlink()
            ),
        )
    )
    # (its four draws together cover much of the 2,000-pair pool, but not the real splits)
    assert written and not {i.id for i in real["dev"]} <= written and not {i.id for i in real["test"]} <= written
    assert os.path.isfile(hidden / "secret") and (hidden / "dev.items.jsonl").is_file()


def test_an_operator_secret_redraws_stored_items(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    bench = Arith()
    bench.prepare_eval_data(tmp_path)
    own = bench.hidden_items_hash("test", tmp_path)
    monkeypatch.setenv(HIDDEN_SECRET_ENV, "5a" * 32)
    bench.prepare_eval_data(tmp_path)
    given = bench.hidden_items_hash("test", tmp_path)
    assert given != own
    other = tmp_path / "elsewhere"  # the operator's secret reproduces the study's items anywhere
    bench.prepare_eval_data(other)
    assert bench.hidden_items_hash("test", other) == given
    monkeypatch.delenv(HIDDEN_SECRET_ENV)
    bench.prepare_eval_data(tmp_path)
    assert bench.hidden_items_hash("test", tmp_path) == own
