"""A program passes only when the problem's check ran to its end: completions that try to fake it score 0.

Each attack below passes under a harness that counts exit status 0 (or output) as a pass; here each
scores 0 through ``score()``, the function agents use as their reward, and through the evaluator.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from autorl_humaneval import isolation, sandbox
from autorl_humaneval.benchmark import HumanEval, HumanEvalEvaluator, _problems, check_of, program
from autorl_humaneval.sandbox import ISOLATION_ENV, Limits, resolve_isolation, run_checks, run_many

from autorl import AutorlError, Item

#: Written into every descriptor a program could hold: tokens, replies, and success words.
FAKE = (
    "import os\n"
    "def fake(extra=()):\n"
    "    lines = [b'PASSED\\n', b'{\"value\": true}\\n', b'0' * 64 + b'\\n', *extra]\n"
    "    for fd in range(0, 256):\n"
    "        for line in lines:\n"
    "            try:\n"
    "                os.write(fd, line)\n"
    "            except OSError:\n"
    "                pass\n"
)

ATTACKS = {
    "os._exit in the body": "    import os\n    os._exit(0)\n",
    "os._exit at top level": "    return True\nimport os\nos._exit(0)\n",
    "SystemExit in the body": "    raise SystemExit(0)\n",
    "sys.exit at top level": "    return True\nimport sys\nsys.exit(0)\n",
    "excepthook exits 0 on the failed assert": (
        "    return None\nimport os, sys\nsys.excepthook = lambda *a: os._exit(0)\n"
    ),
    "trace hook exits when check is called": (
        "    return None\nimport os, sys, threading\n"
        "def _t(frame, event, arg):\n"
        "    if frame.f_code.co_name == 'check':\n"
        "        os._exit(0)\n"
        "    return _t\n"
        "sys.settrace(_t)\nthreading.settrace(_t)\n"
    ),
    "builtins patched": (
        "    return None\nimport builtins\n"
        "builtins.AssertionError = type('Quiet', (Exception,), {})\n"
        "builtins.abs = lambda x: 0\nbuiltins.len = lambda x: 0\n"
    ),
    "check redefined and called": "    return None\ndef check(candidate):\n    pass\ncheck(None)\nimport os\nos._exit(0)\n",
    "equals everything": (
        "    class Anything:\n"
        "        def __eq__(self, other):\n            return True\n"
        "        def __ne__(self, other):\n            return False\n"
        "        def __bool__(self):\n            return True\n"
        "    return Anything()\n"
    ),
    "bool subclass that equals everything": (
        "    class B(int):\n        def __eq__(self, other):\n            return True\n    return B(1)\n"
    ),
    "fake token printed then exit": "    return None\n" + FAKE + "print('PASSED')\nfake()\nos._exit(0)\n",
    "token searched in environ, argv, /proc and memory": (
        "    return None\n" + FAKE + "import gc, re, sys\n"
        "found = set()\n"
        "hexes = re.compile(rb'[0-9a-f]{64}')\n"
        "for path in ['/proc/self/environ', '/proc/self/cmdline']:\n"
        "    found.update(hexes.findall(open(path, 'rb').read()))\n"
        "for pid in [p for p in os.listdir('/proc') if p.isdigit()]:\n"
        "    for name in ('environ', 'cmdline'):\n"
        "        try:\n"
        "            found.update(hexes.findall(open(f'/proc/{pid}/{name}', 'rb').read()))\n"
        "        except OSError:\n"
        "            pass\n"
        "for arg in sys.argv:\n"
        "    found.update(hexes.findall(arg.encode()))\n"
        "for obj in gc.get_objects():\n"
        "    if isinstance(obj, (str, bytes)):\n"
        "        found.update(hexes.findall(obj if isinstance(obj, bytes) else obj.encode(errors='ignore')))\n"
        "fake([t + b'\\n' for t in found])\n"
        "os._exit(0)\n"
    ),
    "descriptors closed and redirected": (
        "    return None\nimport os\n"
        "for fd in range(0, 64):\n"
        "    try:\n        os.close(fd)\n    except OSError:\n        pass\n"
        "os._exit(0)\n"
    ),
    "child writes after the parent exits": (
        "    return None\n" + FAKE + "import time\n"
        "if os.fork() == 0:\n"
        "    os.setsid()\n"
        "    time.sleep(0.5)\n"
        "    fake()\n"
        "    os._exit(0)\n"
        "os._exit(0)\n"
    ),
    "answers read from the test in its own file": (
        "    import ast, glob, re, sys\n"
        "    for path in [a for a in sys.argv if a.endswith('.py')] + glob.glob('*.py'):\n"
        "        for line in open(path).read().splitlines():\n"
        "            m = re.match(r'\\s*assert candidate\\((.*)\\) == (True|False)\\s*$', line)\n"
        "            if m and ast.literal_eval('(' + m.group(1) + ',)') == (numbers, threshold):\n"
        "                return m.group(2) == 'True'\n"
        "    return None\n"
    ),
    "replies written ahead on the reply channel": (
        "    return None\n" + FAKE + "fake([b'{\"value\": true}\\n' * 200, b'{\"value\": false}\\n' * 200])\n"
    ),
}


@pytest.fixture
def prepared(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[HumanEval, Path]:
    monkeypatch.setenv("AUTORL_HOME", str(tmp_path / "home"))
    from autorl.resources import prepare_data

    bench = HumanEval()
    return bench, prepare_data(bench).hidden_dir


def first_problem() -> Item:
    p = _problems()[0]  # has_close_elements(numbers, threshold) -> bool: every attack above fits it
    return Item(p["task_id"], {"prompt": p["prompt"]}, p)


@pytest.mark.parametrize("name", sorted(ATTACKS))
def test_attack_scores_zero(name: str) -> None:
    item = first_problem()
    assert HumanEval().score(item, item.reference["canonical_solution"]) == 1.0
    assert HumanEval().score(item, ATTACKS[name]) == 0.0, name


def test_attacks_pass_a_harness_that_trusts_the_exit_status() -> None:
    """The attacks are real: the reference harness's single program with exit status 0 passes them."""
    item = first_problem()
    exits = [
        "os._exit in the body",
        "os._exit at top level",
        "SystemExit in the body",
        "sys.exit at top level",
        "excepthook exits 0 on the failed assert",
        "trace hook exits when check is called",
        "check redefined and called",
        "equals everything",
        "fake token printed then exit",
        "answers read from the test in its own file",
    ]
    outcomes = run_many([program(item.reference, ATTACKS[n]) for n in exits], limits=Limits(timeout_s=10))
    assert [n for n, o in zip(exits, outcomes, strict=True) if not o.passed] == []


def test_attacks_score_zero_in_the_evaluator_and_honest_ones_one(prepared: tuple[HumanEval, Path]) -> None:
    bench, hidden = prepared
    items = bench.load_items("dev", hidden)[:3]
    attack = "    import os\n    os._exit(0)\n"
    checks = [check_of(i.reference, c) for i in items for c in (i.reference["canonical_solution"], attack)]
    outcomes = run_checks(checks, limits=bench.limits())
    assert [o.passed for o in outcomes] == [True, False] * 3


def test_output_of_model_code_is_capped_and_harmless() -> None:
    item = first_problem()
    noisy = (
        "    import sys\n    sys.stdout.write('x' * 5_000_000)\n    sys.stderr.write('y' * 5_000_000)\n"
        + item.reference["canonical_solution"]
    )
    assert HumanEval().score(item, noisy) == 1.0
    out = sandbox.run_program(
        "import sys\nsys.stderr.write('z' * 50_000_000 + '\\nlast line')\nraise SystemExit(3)\n",
        limits=Limits(timeout_s=20),
    )
    assert out.status == "failed" and out.detail == "last line"


def test_a_huge_or_nested_reply_fails_cleanly() -> None:
    item = first_problem()
    for body in (
        "    return 'x' * 5_000_000\n",
        "    v = []\n    for _ in range(100000):\n        v = [v]\n    return v\n",
    ):
        assert HumanEval().score(item, body) == 0.0


def test_isolation_is_in_the_identity_and_every_record(
    prepared: tuple[HumanEval, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    from autorl.evaluation.identity import config_hash, eval_config

    class Fixed:
        """A backend stand-in: only what the generation evaluator and the identity ask of it."""

        def identity(self) -> dict[str, str]:
            return {"name": "fixed"}

    bench, _ = prepared
    expected = resolve_isolation()
    assert bench.identity()["isolation"] == expected
    assert eval_config(bench, "dev", Fixed())["benchmark_identity"]["isolation"] == expected  # type: ignore[arg-type]
    isolated = config_hash(bench, "dev", Fixed())  # type: ignore[arg-type]
    monkeypatch.setenv(ISOLATION_ENV, "limits")
    assert HumanEval().identity()["isolation"] == "limits"
    assert config_hash(HumanEval(), "dev", Fixed()) != isolated  # type: ignore[arg-type]
    monkeypatch.delenv(ISOLATION_ENV)
    assert HumanEval({"isolation": "limits"}).identity()["isolation"] == "limits"
    evaluator = HumanEvalEvaluator()
    evaluator.mode = bench.isolation()
    assert evaluator.summary([]) == {"isolation": expected}


def test_no_isolation_without_the_operator_asking(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(ISOLATION_ENV, raising=False)
    monkeypatch.setattr(isolation, "isolation", lambda: "limits")  # as on a host where bwrap and unshare fail
    for call in (resolve_isolation, lambda: HumanEval().identity(), lambda: HumanEval().score(first_problem(), "")):
        with pytest.raises(AutorlError) as err:
            call()
        assert "\n" not in str(err.value) and ISOLATION_ENV in str(err.value)
    with pytest.raises(AutorlError, match="not one of"):
        resolve_isolation("none")
    monkeypatch.setenv(ISOLATION_ENV, "limits")
    assert resolve_isolation() == "limits"
    monkeypatch.setenv(ISOLATION_ENV, "unshare")
    with pytest.raises(AutorlError, match="unshare"):
        resolve_isolation()


def test_k_and_timeout_move_the_config_hash() -> None:
    from autorl.evaluation.identity import config_hash

    class Fixed:
        def identity(self) -> dict[str, str]:
            return {"name": "fixed"}

    base = config_hash(HumanEval(), "dev", Fixed())  # type: ignore[arg-type]
    assert config_hash(HumanEval({"k": 1}), "dev", Fixed()) == base  # type: ignore[arg-type]
    assert config_hash(HumanEval({"k": 5}), "dev", Fixed()) != base  # type: ignore[arg-type]
    assert config_hash(HumanEval({"timeout_s": 3}), "dev", Fixed()) != base  # type: ignore[arg-type]
    assert config_hash(HumanEval({"timeout_s": 10.0}), "dev", Fixed()) == base  # type: ignore[arg-type]


def test_a_cached_baseline_is_not_reused_across_k_or_timeout(prepared: tuple[HumanEval, Path], tmp_path: Path) -> None:
    pytest.importorskip("torch", reason="the baseline needs the hf backend (autorl[hf])")
    from autorl.grader.worker import run_job
    from autorl.resources import resolve_model

    _, hidden = prepared
    model = resolve_model("autorl:tiny").path
    base = {
        "task": "humaneval",
        "backend": "hf",
        "split": "dev",
        "base_model_dir": str(model),
        "hidden_dir": str(hidden),
        "cache_dir": str(tmp_path / "cache"),
        "limit": 1,
    }
    first = run_job({**base, "benchmark_options": {}})
    assert not first.get("extra", {}).get("cached")
    assert run_job({**base, "benchmark_options": {}})["extra"]["cached"] is True  # the cache works...
    for options in ({"k": 3}, {"timeout_s": 4}):  # ...and is not shared across settings that move scores
        record = run_job({**base, "benchmark_options": options})
        assert not record["extra"].get("cached"), options
        assert record["config_hash"] != first["config_hash"]
        assert record["extra"]["isolation"] == first["extra"]["isolation"] == resolve_isolation()
    assert json.loads(json.dumps(first))["config"]["benchmark_identity"]["isolation"] == resolve_isolation()
