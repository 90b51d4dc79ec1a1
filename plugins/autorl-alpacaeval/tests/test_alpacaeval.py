"""AlpacaEval with a scripted judge (a real HTTP server on 127.0.0.1 speaking chat completions with logprobs)."""

from __future__ import annotations

import json
import math
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from autorl_alpacaeval.benchmark import AlpacaEvalBenchmark, annotations, length_controlled
from autorl_alpacaeval.data import overlaps, remove_overlap
from autorl_alpacaeval.judge import Judge, JudgeConfig

from autorl.testing import PolicyBackend

N = 30


def eval_rows() -> list[dict[str, Any]]:
    return [{"instruction": f"Write a short note about topic number {i} for a friend who likes {i % 7} things.",
             "output": "ref " * (5 + i % 5), "generator": "gpt4_turbo", "dataset": "fixture"} for i in range(N)]


@pytest.fixture
def mirror(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    root = tmp_path / "mirror" / "alpaca_eval"
    root.mkdir(parents=True)
    (root / "alpaca_eval.json").write_text(json.dumps(eval_rows()))
    train = [{"instruction": f"Give three tips for task {i}.", "input": "", "output": f"tips {i}"} for i in range(40)]
    train.append({"instruction": eval_rows()[3]["instruction"], "input": "", "output": "leak"})  # the same
    train.append({"instruction": "Please " + eval_rows()[5]["instruction"].lower() + " Thanks!", "input": "",
                  "output": "leak"})  # a near copy
    (root / "alpaca_data.json").write_text(json.dumps(train))
    monkeypatch.setenv("AUTORL_DATA_DIR", str(tmp_path / "mirror"))
    return root


class ScriptedJudge:
    """Prefers the longer output, with probability 0.9; fails on instructions it is told to."""

    def __init__(self) -> None:
        self.calls: list[dict[str, Any]] = []
        self.fail_once: set[str] = set()
        self.always_fail: set[str] = set()

    def app(self) -> Any:
        from starlette.applications import Starlette
        from starlette.requests import Request
        from starlette.responses import JSONResponse
        from starlette.routing import Route

        async def completions(request: Request) -> JSONResponse:
            body = await request.json()
            self.calls.append(body)
            text = body["messages"][-1]["content"]
            instruction = text.split('"instruction": """', 1)[1].split('"""', 1)[0]
            if instruction in self.always_fail or instruction in self.fail_once:
                self.fail_once.discard(instruction)
                return JSONResponse({"error": "overloaded"}, status_code=503)
            outs = [part.split('"""', 1)[0] for part in text.split('"output": """')[1:3]]
            first_better = len(outs[0]) >= len(outs[1])
            p = 0.9 if first_better else 0.1
            top = [{"token": "m", "logprob": math.log(p)}, {"token": "M", "logprob": math.log(1 - p)}]
            return JSONResponse({"choices": [{"index": 0, "message": {"role": "assistant", "content": "m" if first_better else "M"},
                                              "logprobs": {"content": [{"token": "m", "logprob": math.log(p), "top_logprobs": top}]}}],
                                 "usage": {"prompt_tokens": 400, "completion_tokens": 1}})

        return Starlette(routes=[Route("/v1/chat/completions", completions, methods=["POST"])])


@pytest.fixture
def judge_server(monkeypatch: pytest.MonkeyPatch) -> Iterator[ScriptedJudge]:
    import uvicorn

    judge = ScriptedJudge()
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(judge.app(), host="127.0.0.1", port=port, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    while not server.started:
        time.sleep(0.05)
    for k, v in {"AUTORL_JUDGE_BASE_URL": f"http://127.0.0.1:{port}/v1", "AUTORL_JUDGE_MODEL": "judge-test",
                 "AUTORL_JUDGE_API_KEY": "sk-judge", "AUTORL_JUDGE_MAX_RETRIES": "2", "AUTORL_JUDGE_TIMEOUT": "5",
                 "AUTORL_JUDGE_PRICE_IN": "10", "AUTORL_JUDGE_PRICE_OUT": "30"}.items():
        monkeypatch.setenv(k, v)
    yield judge
    server.should_exit = True
    thread.join(timeout=10)


def test_training_data_excludes_the_evaluation_instructions(mirror: Path, tmp_path: Path) -> None:
    bench = AlpacaEvalBenchmark({"train_size": 100})
    train_dir = tmp_path / "home" / "datasets" / "alpacaeval"
    bench.prepare_train_data(train_dir)
    rows = [json.loads(x) for x in (train_dir / "train.jsonl").read_text().splitlines()]
    report = json.loads((train_dir / "overlap_report.json").read_text())
    assert len(rows) == 40 and report["removed_exact"] == 1 and report["removed_near"] == 1
    assert overlaps(rows, eval_rows()) == 0  # what the agent gets passes the check
    assert all(r["output"] != "leak" for r in rows)
    kept, _ = remove_overlap([{"instruction": "Something else entirely.", "input": ""}], eval_rows())
    assert len(kept) == 1


def test_dev_and_test_split_the_805(mirror: Path, tmp_path: Path) -> None:
    bench = AlpacaEvalBenchmark({"dev_size": 10})
    bench.prepare_eval_data(tmp_path / "hidden")
    dev, test = bench.load_items("dev", tmp_path / "hidden"), bench.load_items("test", tmp_path / "hidden")
    assert (len(dev), len(test)) == (10, 20) and not {i.id for i in dev} & {i.id for i in test}
    again = AlpacaEvalBenchmark({"dev_size": 10})
    assert [i.id for i in again.load_items("dev", tmp_path / "hidden")] == [i.id for i in dev]


def test_win_rate_cache_retries_and_cost(mirror: Path, tmp_path: Path, judge_server: ScriptedJudge) -> None:
    bench = AlpacaEvalBenchmark({"dev_size": N})
    hidden = tmp_path / "hidden"
    bench.prepare_eval_data(hidden)
    items = bench.load_items("dev", hidden)
    # the model answers long (beats the 5-9 word reference) on even indices, one word on odd ones
    answers = {i.input["instruction"]: ("word " * 30 if i.reference["index"] % 2 == 0 else "no") for i in items}
    judge_server.fail_once.add(items[0].input["instruction"])
    judge_server.always_fail.add(items[1].input["instruction"])
    evaluator = bench.evaluator()
    results = evaluator.evaluate(bench, items, PolicyBackend(lambda p: answers[p[-1]["content"] if isinstance(p, list) else p]))
    by_index = {r.extra["index"]: r for r in results}
    failing = items[1].reference["index"]
    assert by_index[failing].error is not None and "judge failed after 3 attempts" in by_index[failing].error
    expected = [0.9 if idx % 2 == 0 else 0.1 for idx in sorted(by_index) if idx != failing]
    scored = [by_index[idx].score for idx in sorted(by_index) if idx != failing]
    assert scored == pytest.approx(expected)  # by hand: P(model better) as the judge gave it, order undone
    calls = len(judge_server.calls)
    assert calls == N + 1 + 2  # one retry for the flaky one, three attempts for the failing one
    assert judge_server.calls[0]["max_tokens"] == 1 and judge_server.calls[0]["logprobs"] is True
    assert any("model_identifier" in m["content"] for m in judge_server.calls[0]["messages"])
    summary = evaluator.summary(results)
    assert summary["judge_prompt_tokens"] == 400 * (N - 1) and summary["judge_errors"] == 1
    assert summary["judge_cost_usd"] == pytest.approx((400 * (N - 1) * 10 + (N - 1) * 30) / 1e6)
    # alpaca-eval's own win rate on the same judgements equals ours
    from alpaca_eval.metrics import get_winrate

    assert get_winrate(annotations(results))["win_rate"] == pytest.approx(100 * sum(expected) / len(expected))
    # an unchanged checkpoint costs nothing the second time
    again = evaluator.evaluate(bench, items, PolicyBackend(lambda p: answers[p[-1]["content"]]))
    assert len(judge_server.calls) == calls + 3  # only the failing item is asked again
    assert [r.score for r in again if r.error is None] == [r.score for r in results if r.error is None]
    assert sum(1 for r in again if r.extra["judge_cached"]) == N - 1


def test_length_controlled_win_rate_is_alpaca_evals(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    from autorl.evaluation.base import ItemResult

    results = [ItemResult(f"dev-{i:03d}", 0.0, [], None,
                          {"output_1": "r" * (40 + i), "output_2": "m" * (20 + 7 * i), "reference_generator": "ref",
                           "preference": 0.2 + 0.6 * (i % 2), "index": i}) for i in range(40)]
    # the GLM needs AlpacaEval's instruction difficulties (df_gamed.csv on the hub): seed the hub cache
    cache = tmp_path / "hub"
    snap = cache / "datasets--tatsu-lab--alpaca_eval" / "snapshots" / ("0" * 40)
    snap.mkdir(parents=True)
    (cache / "datasets--tatsu-lab--alpaca_eval" / "refs").mkdir()
    (cache / "datasets--tatsu-lab--alpaca_eval" / "refs" / "main").write_text("0" * 40)
    rows = ["index,instruction_difficulty,model,preference,std_delta_len,not_gamed_baseline"]
    rows += [f"{i},{(i % 5) / 5 - 0.4},gamed,{0.3 + 0.4 * (i % 2)},{(i % 9) / 4 - 1},False" for i in range(40)]
    (snap / "df_gamed.csv").write_text("\n".join(rows) + "\n")
    monkeypatch.setenv("HF_HUB_CACHE", str(cache))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    import huggingface_hub.constants as hc

    monkeypatch.setattr(hc, "HF_HUB_CACHE", str(cache))
    monkeypatch.setattr(hc, "HF_HUB_OFFLINE", True)
    ours = length_controlled(results)
    assert ours.get("lc_error") is None, ours
    from alpaca_eval.metrics import get_length_controlled_winrate

    theirs = get_length_controlled_winrate(annotations(results), save_weights_dir=None, is_warn_extreme_changes=False)
    assert ours["length_controlled_winrate"] == pytest.approx(float(theirs["length_controlled_winrate"]))
    assert ours["alpaca_eval_win_rate"] == pytest.approx(50.0)


def test_judge_key_stays_with_the_grader(judge_server: ScriptedJudge) -> None:
    from autorl.agents.process import agent_environment

    config = JudgeConfig.from_env()
    assert "sk-judge" not in json.dumps(config.identity()) and "sk-judge" not in repr(config)
    env = agent_environment({"TASK": "alpacaeval"}, {})
    assert not any(k.startswith("AUTORL_JUDGE") for k in env) and "OPENAI_API_KEY" not in env
    assert Judge(config).http.headers["authorization"] == "Bearer sk-judge"


def test_autorl_eval_on_alpacaeval(mirror: Path, tmp_path: Path, judge_server: ScriptedJudge,
                                   monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("torch", reason="the tiny-model run needs the hf backend (autorl[hf])")
    from autorl.testing import check_benchmark_end_to_end

    monkeypatch.setenv("AUTORL_HOME", str(tmp_path / "home"))
    record = check_benchmark_end_to_end("alpacaeval", limit=4, options={"chat_template": False, "max_new_tokens": 8,
                                                                        "dev_size": 10})
    assert record["extra"]["judge"]["model"] == "judge-test" and record["extra"]["judge_errors"] == 0
    assert record["config"]["benchmark_identity"]["judge"]["model"] == "judge-test"
    assert len(judge_server.calls) == 4
