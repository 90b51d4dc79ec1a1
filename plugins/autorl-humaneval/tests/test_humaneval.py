"""HumanEval splits, pass@1 on canonical and wrong solutions, and containment of hostile programs."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
import uuid
from pathlib import Path

import pytest
from autorl_humaneval.benchmark import HumanEval, _problems, check_of, pass_at_k
from autorl_humaneval.sandbox import Limits, isolation, run_checks, run_many, run_program


@pytest.fixture
def prepared(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[HumanEval, Path, Path]:
    monkeypatch.setenv("AUTORL_HOME", str(tmp_path / "home"))
    from autorl.resources import prepare_data

    bench = HumanEval()
    data = prepare_data(bench)
    return bench, data.train_dir, data.hidden_dir


def test_splits_are_disjoint_and_hidden(prepared: tuple[HumanEval, Path, Path]) -> None:
    bench, train_dir, hidden_dir = prepared
    train = [json.loads(x)["task_id"] for x in (train_dir / "train.jsonl").read_text().splitlines()]
    dev = [i.id for i in bench.load_items("dev", hidden_dir)]
    test = [i.id for i in bench.load_items("test", hidden_dir)]
    assert (len(train), len(dev), len(test)) == (82, 41, 41)
    assert sorted(train + dev + test) == sorted(f"HumanEval/{k}" for k in range(164))
    assert train != [f"HumanEval/{k}" for k in range(82)]  # drawn with the secret, not the problems' order
    assert {p.name for p in hidden_dir.glob("*.jsonl")} == {"dev.items.jsonl", "test.items.jsonl"}
    assert (hidden_dir.stat().st_mode & 0o777) == 0o700
    assert bench.hidden_paths()[0].name == "HumanEval.jsonl.gz"


def test_hidden_items_contract(tmp_path: Path) -> None:
    from autorl.testing import check_hidden_items_secret

    check_hidden_items_secret(HumanEval(), tmp_path)


def test_hardening_checks(tmp_path: Path) -> None:
    """No secret, no items; the escapes of autorl.hardening score 0 through the sandboxed checker and score()."""
    from autorl.testing import check_hardening

    check_hardening(lambda: HumanEval({"isolation": isolation()}), tmp_path, limit=2)


def test_near_duplicate_problems_share_a_part_of_every_draw() -> None:
    import random

    from autorl_humaneval.benchmark import N_DEV, N_TRAIN, SIBLINGS, _siblings_together

    from autorl import Item
    from autorl.audit.overlap import NgramIndex  # the audit reads items this way

    problems = _problems()
    index = NgramIndex(("all", Item(str(k), {"prompt": p["prompt"]})) for k, p in enumerate(problems))
    shared = {
        tuple(sorted((k, int(hit.split(":")[1]))))
        for k, p in enumerate(problems)
        for text in (p["prompt"], json.dumps(p))
        for hit in index.matches(text)
        if int(hit.split(":")[1]) != k
    }
    assert shared == set(SIBLINGS)  # every pair the audit would match, and no other
    for seed in range(200):
        order = list(range(len(problems)))
        random.Random(seed).shuffle(order)
        together = _siblings_together(order)
        assert sorted(together) == list(range(len(problems)))
        cut = [set(together[:N_TRAIN]), set(together[N_TRAIN : N_TRAIN + N_DEV]), set(together[N_TRAIN + N_DEV :])]
        assert all(any({a, b} <= part for part in cut) for a, b in SIBLINGS), seed


def test_two_secrets_draw_different_splits_and_train_follows_the_draw(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from autorl.resources import prepare_data

    draws = []
    for name in ("one", "two"):
        monkeypatch.setenv("AUTORL_HOME", str(tmp_path / name))
        bench = HumanEval()
        data = prepare_data(bench)
        train = {json.loads(x)["task_id"] for x in (data.train_dir / "train.jsonl").read_text().splitlines()}
        dev, test = ({i.id for i in bench.load_items(s, data.hidden_dir)} for s in ("dev", "test"))
        assert not train & (dev | test)  # the agent's data leaves out exactly the hidden problems
        draws.append((train, dev, test))
    assert draws[0][1] != draws[1][1] and draws[0][2] != draws[1][2]
    assert draws[0][0] != draws[1][0]


def test_canonical_solutions_pass_and_wrong_ones_fail() -> None:
    bench = HumanEval()
    problems = _problems()  # all 164, training problems too: the checker must run every problem's tests
    good = run_checks([check_of(p, p["canonical_solution"]) for p in problems], limits=bench.limits())
    assert [(p["task_id"], o.detail) for p, o in zip(problems, good, strict=True) if not o.passed] == []
    bad = run_checks([check_of(p, "    return None\n") for p in problems[::4]], limits=bench.limits())
    assert not any(o.passed for o in bad)


def test_pass_at_k() -> None:
    assert pass_at_k(10, 0, 1) == 0.0
    assert pass_at_k(10, 10, 1) == 1.0
    assert pass_at_k(10, 3, 1) == pytest.approx(0.3)
    assert pass_at_k(5, 1, 2) == pytest.approx(1 - 6 / 10)


QUICK = Limits(timeout_s=5.0, memory_mb=512)


def test_infinite_loop_times_out() -> None:
    assert run_program("while True:\n    pass\n", limits=Limits(timeout_s=2.0)).status == "timeout"


def test_fork_bomb_is_contained() -> None:
    out = run_program(
        "import os\nwhile True:\n    try:\n        os.fork()\n    except OSError:\n        pass\n",
        limits=Limits(timeout_s=3.0, processes=32),
    )
    assert not out.passed
    from autorl_humaneval.sandbox import UID_POOL

    rows = subprocess.run(["ps", "-e", "-o", "uid=,stat="], capture_output=True, text=True).stdout.splitlines()
    live = [r for r in rows if int(r.split()[0]) in UID_POOL and not r.split()[1].startswith("Z")]
    assert live == []  # nothing it forked is left running (zombies wait for init to reap them)


def test_memory_blow_up_fails() -> None:
    out = run_program("x = bytearray(4 * 1024 ** 3)\n", limits=QUICK)
    assert not out.passed and "MemoryError" in out.detail


def test_writing_outside_the_temporary_directory_fails(tmp_path: Path) -> None:
    if isolation() != "bwrap":
        pytest.skip("a private /tmp needs bubblewrap (apt-get install bubblewrap); here only limits apply")
    for target in (tmp_path / "escaped.txt", Path.home() / "escaped", Path("/usr/lib/escaped")):
        out = run_program(f"open({str(target)!r}, 'w').write('x')\n", limits=QUICK)
        assert not out.passed and not target.exists(), target
    # /tmp inside the sandbox is its own: the write succeeds there and never reaches the real /tmp
    shared = Path("/tmp") / f"autorl-escape-{uuid.uuid4().hex}"
    run_program(f"open({str(shared)!r}, 'w').write('x')\n", limits=QUICK)
    assert not shared.exists()
    assert run_program("open('inside.txt', 'w').write('fine')\n", limits=QUICK).passed


def test_network_connections_fail() -> None:
    if isolation() == "limits":
        pytest.skip("no network namespace can be made here (neither bwrap nor unshare runs)")
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(1)
    server.settimeout(6)
    port = server.getsockname()[1]
    connected: list[bool] = []

    def accept() -> None:
        try:
            server.accept()
            connected.append(True)
        except OSError:
            pass

    t = threading.Thread(target=accept)
    t.start()
    out = run_program(f"import socket\nsocket.create_connection(('127.0.0.1', {port}), timeout=3)\n", limits=QUICK)
    t.join()
    server.close()
    assert not out.passed and not connected


def test_grader_store_and_evaluation_data_cannot_be_read(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AUTORL_HOME", str(tmp_path / "home"))
    store = tmp_path / "home" / "grader" / "run1"
    store.mkdir(parents=True)
    os.chmod(store, 0o700)
    (store / "grader.db").write_text("secret scores")
    bench = HumanEval()
    for target in (store / "grader.db", bench.hidden_paths()[0]):
        out = run_many(
            [f"data = open({str(target)!r}, 'rb').read()\nassert data\n"], limits=QUICK, hidden=bench.sandbox_hidden()
        )[0]
        assert not out.passed, target


def test_hidden_paths_behind_a_private_directory_do_not_break_the_sandbox() -> None:
    import shutil
    import tempfile

    root = Path(tempfile.mkdtemp(dir="/var/tmp"))  # outside the sandbox's private /tmp, like ~/.cache/autorl
    try:
        private = root / "private"
        (private / "store").mkdir(parents=True)
        os.chmod(root, 0o755)
        os.chmod(private, 0o700)  # like /root: the sandbox user cannot reach what is inside
        out = run_program("print('fine')\n", limits=QUICK, hidden=[private / "store", root / "absent"])
        assert out.passed, out.detail
    finally:
        shutil.rmtree(root, ignore_errors=True)


def test_scoring_runs_through_the_sandbox(prepared: tuple[HumanEval, Path, Path]) -> None:
    bench, _, hidden_dir = prepared
    item = bench.load_items("dev", hidden_dir)[0]
    assert bench.score(item, item.reference["canonical_solution"]) == 1.0
    assert bench.score(item, "    import os\n    os.system('touch /tmp/x')\n    return None\n") == 0.0


def test_tiny_model_eval_end_to_end(prepared: tuple[HumanEval, Path, Path]) -> None:
    pytest.importorskip("torch", reason="the tiny-model run needs the hf backend (autorl[hf])")
    proc = subprocess.run(
        [
            sys.executable,
            "-c",
            "from autorl.cli import main; main()",
            "eval",
            "--task",
            "humaneval",
            "--model",
            "autorl:tiny",
            "--limit",
            "3",
            "--json",
        ],
        capture_output=True,
        text=True,
        env=dict(os.environ),
        timeout=900,
    )
    assert proc.returncode == 0, proc.stderr
    record = json.loads(proc.stdout)
    assert record["n"] == 3 and record["score"] == 0.0 and record["benchmark"] == "humaneval"


def test_instructions_show_the_prompt_format() -> None:
    from autorl.runs.workspace import instructions

    text = instructions(HumanEval(), "base", 60, "http://127.0.0.1:1")
    assert "<the item's prompt>" in text and "max new tokens: 512" in text
