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
from autorl_alpacaeval.benchmark import AlpacaEvalBenchmark, length_controlled, to_annotations
from autorl_alpacaeval.data import overlaps, remove_overlap
from autorl_alpacaeval.judge import Judge, JudgeConfig

from autorl.testing import PolicyBackend

N = 30


def eval_rows() -> list[dict[str, Any]]:
    """Records as in alpaca_eval_gpt4_baseline.json: dataset, instruction, output, generator."""
    return [
        {
            "dataset": "helpful_base",
            "instruction": f"Write a short note about topic number {i} for a friend who likes {i % 7} things.",
            "output": "ref " * (5 + i % 5),
            "generator": "gpt4_turbo",
        }
        for i in range(N)
    ]


@pytest.fixture
def mirror(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    root = tmp_path / "mirror" / "alpaca_eval"
    root.mkdir(parents=True)
    (root / "alpaca_eval_gpt4_baseline.json").write_text(json.dumps(eval_rows()))
    train = [{"instruction": f"Give three tips for task {i}.", "input": "", "output": f"tips {i}"} for i in range(40)]
    train.append({"instruction": eval_rows()[3]["instruction"], "input": "", "output": "leak"})  # the same
    train.append(
        {"instruction": "Please " + eval_rows()[5]["instruction"].lower() + " Thanks!", "input": "", "output": "leak"}
    )  # a near copy
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
            return JSONResponse(
                {
                    "choices": [
                        {
                            "index": 0,
                            "message": {"role": "assistant", "content": "m" if first_better else "M"},
                            "logprobs": {"content": [{"token": "m", "logprob": math.log(p), "top_logprobs": top}]},
                        }
                    ],
                    "usage": {"prompt_tokens": 400, "completion_tokens": 1},
                }
            )

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
    for k, v in {
        "AUTORL_JUDGE_BASE_URL": f"http://127.0.0.1:{port}/v1",
        "AUTORL_JUDGE_MODEL": "judge-test",
        "AUTORL_JUDGE_API_KEY": "sk-judge",
        "AUTORL_JUDGE_MAX_RETRIES": "2",
        "AUTORL_JUDGE_TIMEOUT": "5",
        "AUTORL_JUDGE_PRICE_IN": "10",
        "AUTORL_JUDGE_PRICE_OUT": "30",
    }.items():
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


def test_hidden_split_comes_from_the_secret(mirror: Path, tmp_path: Path) -> None:
    from autorl.testing import check_hidden_items_secret

    check_hidden_items_secret(AlpacaEvalBenchmark({"dev_size": 10}), tmp_path / "check")
    assert AlpacaEvalBenchmark().hidden_paths() == [mirror]  # the mirror is masked in the sandbox


def test_hardening_checks(mirror: Path, tmp_path: Path) -> None:
    from autorl.testing import check_hardening

    # left out: a remote judge scores alpacaeval (its own tests hold the judge against a scripted endpoint)
    check_hardening(lambda: AlpacaEvalBenchmark({"dev_size": 10}), tmp_path, skip=("scorer-escapes",))


def test_dev_and_test_split_the_805(mirror: Path, tmp_path: Path) -> None:
    bench = AlpacaEvalBenchmark({"dev_size": 10})
    bench.prepare_eval_data(tmp_path / "hidden")
    dev, test = bench.load_items("dev", tmp_path / "hidden"), bench.load_items("test", tmp_path / "hidden")
    assert (len(dev), len(test)) == (10, 20) and not {i.id for i in dev} & {i.id for i in test}
    again = AlpacaEvalBenchmark({"dev_size": 10})
    assert [i.id for i in again.load_items("dev", tmp_path / "hidden")] == [i.id for i in dev]


def test_win_rate_cache_retries_and_cost(mirror: Path, tmp_path: Path, judge_server: ScriptedJudge) -> None:
    bench = AlpacaEvalBenchmark({"dev_size": N})
    hidden = bench.hidden_dir = tmp_path / "hidden"  # as the harness sets it: the judge's cache lives there
    bench.prepare_eval_data(hidden)
    items = bench.load_items("dev", hidden)
    # the model answers long (beats the 5-9 word reference) on even indices, one word on odd ones
    answers = {i.input["instruction"]: ("word " * 30 if i.reference["index"] % 2 == 0 else "no") for i in items}
    judge_server.fail_once.add(items[0].input["instruction"])
    judge_server.always_fail.add(items[1].input["instruction"])
    evaluator = bench.evaluator()
    results = evaluator.evaluate(
        bench, items, PolicyBackend(lambda p: answers[p[-1]["content"] if isinstance(p, list) else p])
    )
    by_index = {r.extra["index"]: r for r in results}
    failing = items[1].reference["index"]
    assert failing not in by_index and len(results) == N - 1  # excluded, not scored 0
    expected = [0.9 if idx % 2 == 0 else 0.1 for idx in sorted(by_index)]
    scored = [by_index[idx].score for idx in sorted(by_index)]
    assert scored == pytest.approx(expected)  # by hand: P(model better) as the judge gave it, order undone
    calls = len(judge_server.calls)
    assert calls == N + 1 + 2  # one retry for the flaky one, three attempts for the failing one
    assert judge_server.calls[0]["max_tokens"] == 1 and judge_server.calls[0]["logprobs"] is True
    assert any("model_identifier" in m["content"] for m in judge_server.calls[0]["messages"])
    summary = evaluator.summary(results)
    assert summary["judge_prompt_tokens"] == 400 * (N - 1) and summary["judge_errors"] == 1
    assert (
        list(summary["excluded_items"]) == [items[1].id]
        and "judge failed after 3 attempts" in summary["excluded_items"][items[1].id]
    )
    assert summary["judged"] == N - 1
    assert summary["judge_cost_usd"] == pytest.approx((400 * (N - 1) * 10 + (N - 1) * 30) / 1e6)
    # alpaca-eval's own win rate on the same judgements equals ours
    from alpaca_eval.metrics import get_winrate

    assert get_winrate(to_annotations(results))["win_rate"] == pytest.approx(100 * sum(expected) / len(expected))
    # an unchanged checkpoint costs nothing the second time
    again = evaluator.evaluate(bench, items, PolicyBackend(lambda p: answers[p[-1]["content"]]))
    assert len(judge_server.calls) == calls + 3  # only the failing item is asked again
    assert [r.score for r in again] == [r.score for r in results]
    assert sum(1 for r in again if r.extra["judge_cached"]) == N - 1 == len(again)


def gamed_csv() -> str:
    """A df_gamed.csv in the published file's columns (AlpacaEval's annotations of two length-gamed baselines
    with the instruction difficulties), small and fixed."""
    rows = ["index,instruction_difficulty,model,preference,std_delta_len,not_gamed_baseline"]
    rows += [
        f"{i},{(i % 5) / 2 - 1},gamed_{m},{0.95 if (i % 9) < 4 + m else 0.1},{(i % 9) / 4 - 1},False"
        for m in (0, 1)
        for i in range(60)
    ]
    return "\n".join(rows) + "\n"


def reference_annotations() -> list[dict[str, Any]]:
    """AlpacaEval annotations written by hand in its own format (preference 1: output_1, the reference, wins;
    2: output_2, the model, wins): the input the recorded reference numbers were computed on."""
    return [
        {
            "instruction": f"dev-{i:03d}",
            "output_1": "r" * 300,
            "output_2": "m" * (100 + 10 * ((i * 7) % 41)),
            "generator_1": "gpt4_turbo",
            "generator_2": "model",
            "annotator": "weighted_alpaca_eval_gpt4_turbo",
            "preference": 1.0 + (0.9 if (i * 7) % 41 > 20 + i % 5 else 0.2),
            "index": i,
        }
        for i in range(60)
    ]


def seed_hub_cache(cache: Path) -> None:
    """The GLM reads df_gamed.csv from the hub (unreachable here): an offline hub cache holding the fixture."""
    repo = cache / "datasets--tatsu-lab--alpaca_eval"
    (repo / "snapshots" / ("0" * 40)).mkdir(parents=True, exist_ok=True)
    (repo / "refs").mkdir(exist_ok=True)
    (repo / "refs" / "main").write_text("0" * 40)
    (repo / "snapshots" / ("0" * 40) / "df_gamed.csv").write_text(gamed_csv())


# Produced by alpaca-eval 0.6.6's own get_length_controlled_winrate(reference_annotations(),
# glm_name="length_controlled_v1", save_weights_dir=None) on the df_gamed fixture above, with the command
#   python plugins/autorl-alpacaeval/tests/test_alpacaeval.py
# (the __main__ block at the end of this file).
ALPACA_EVAL_WIN_RATE, ALPACA_EVAL_LC_WIN_RATE, ALPACA_EVAL_LC_SE = (
    50.33333333333332,
    53.27355584043014,
    0.6690717941005828,
)


def test_length_controlled_win_rate_matches_alpaca_evals_numbers(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    from autorl import ItemResult

    # the same judgements as our evaluator records them: P(model better), the reference as output_1
    results = [
        ItemResult(
            a["instruction"],
            a["preference"] - 1.0,
            [],
            None,
            {
                "output_1": a["output_1"],
                "output_2": a["output_2"],
                "reference_generator": "gpt4_turbo",
                "preference": a["preference"] - 1.0,
                "index": a["index"],
            },
        )
        for a in reference_annotations()
    ]
    seed_hub_cache(tmp_path / "hub")
    import huggingface_hub.constants as hc

    monkeypatch.setattr(hc, "HF_HUB_CACHE", str(tmp_path / "hub"))
    monkeypatch.setattr(hc, "HF_HUB_OFFLINE", True)
    ours = length_controlled(results)
    assert ours.get("lc_error") is None, ours
    assert ours["alpaca_eval_win_rate"] == pytest.approx(ALPACA_EVAL_WIN_RATE, abs=1e-9)
    assert ours["length_controlled_winrate"] == pytest.approx(ALPACA_EVAL_LC_WIN_RATE, abs=1e-6)
    assert ours["lc_standard_error"] == pytest.approx(ALPACA_EVAL_LC_SE, abs=1e-6)
    # the length penalty is real here: the model wins by writing longer, and the LC rate differs from the raw one
    assert abs(ours["length_controlled_winrate"] - ours["alpaca_eval_win_rate"]) > 1


def test_alpacaeval_1_reference_set_is_refused(tmp_path: Path) -> None:
    from autorl_alpacaeval.data import load_eval_set

    from autorl import ResourceError

    root = tmp_path / "alpaca_eval"
    root.mkdir()
    v1 = [{"dataset": "helpful_base", "instruction": "Hi?", "output": "Hello.", "generator": "text_davinci_003"}]
    (root / "alpaca_eval.json").write_text(json.dumps(v1))
    with pytest.raises(ResourceError, match=r"1\.0") as err:
        load_eval_set(root, tmp_path / "hub")
    assert "\n" not in str(err.value) and "alpaca_eval_gpt4_baseline.json" in str(err.value)
    (root / "alpaca_eval_gpt4_baseline.json").write_text(json.dumps(v1))  # right name, 1.0 content
    with pytest.raises(ResourceError, match="text_davinci_003"):
        load_eval_set(root, tmp_path / "hub")


def test_eval_data_prepared_from_the_1_0_set_is_prepared_again(mirror: Path, tmp_path: Path) -> None:
    from autorl import Item, write_hidden_items

    hidden = tmp_path / "hidden"
    hidden.mkdir()
    for split in ("dev", "test"):  # items prepared from AlpacaEval 1.0's references
        write_hidden_items(
            hidden,
            split,
            [
                Item(
                    f"{split}-000",
                    {"instruction": "old"},
                    {"output": "davinci", "generator": "text_davinci_003", "index": 0},
                )
            ],
        )
    (hidden / "prepared.json").write_text(json.dumps({"dev_size": 10}))
    bench = AlpacaEvalBenchmark({"dev_size": 10})
    bench.prepare_eval_data(hidden)
    items = bench.load_items("dev", hidden) + bench.load_items("test", hidden)
    assert len(items) == N and {i.reference["generator"] for i in items} == {"gpt4_turbo"}
    assert bench.identity()["reference_set"] == "alpaca_eval_gpt4_baseline"


def test_judge_failures_leave_the_paired_comparison_too(
    mirror: Path, tmp_path: Path, judge_server: ScriptedJudge
) -> None:
    from autorl.evaluation.stats import paired_compare
    from autorl.grader.records import paired_scores

    bench = AlpacaEvalBenchmark({"dev_size": N})
    hidden = bench.hidden_dir = tmp_path / "hidden"
    bench.prepare_eval_data(hidden)
    items = bench.load_items("dev", hidden)

    def record(answer: str, failing: str) -> dict[str, Any]:
        judge_server.always_fail = {failing}
        evaluator = bench.evaluator()
        results = evaluator.evaluate(bench, items, PolicyBackend(lambda p: answer))
        return {"item_scores": {r.id: r.score for r in results}, "extra": evaluator.summary(results)}

    base = record("no", items[0].input["instruction"])  # the baseline loses everywhere (0.1)
    cand = record("word " * 40, items[1].input["instruction"])  # the candidate wins everywhere (0.9)
    b, c = paired_scores(base, cand)
    assert set(b) == set(c) == {i.id for i in items[2:]}
    comparison = paired_compare(b, c)
    assert comparison.n == N - 2 and comparison.difference == pytest.approx(80.0)
    # each record's own win rate stands on its judged items, with the failure counted
    assert len(base["item_scores"]) == len(cand["item_scores"]) == N - 1
    assert base["extra"]["judge_errors"] == cand["extra"]["judge_errors"] == 1


def test_a_judge_that_answers_nothing_fails_the_evaluation(
    mirror: Path, tmp_path: Path, judge_server: ScriptedJudge
) -> None:
    from autorl import EvaluationError

    bench = AlpacaEvalBenchmark({"dev_size": 3})
    hidden = tmp_path / "hidden"
    bench.prepare_eval_data(hidden)
    items = bench.load_items("dev", hidden)
    judge_server.always_fail = {i.input["instruction"] for i in items}
    with pytest.raises(EvaluationError, match="none of the 3"):
        bench.evaluator().evaluate(bench, items, PolicyBackend(lambda p: "x"))


def test_judge_key_stays_with_the_grader(judge_server: ScriptedJudge) -> None:
    from autorl.sandbox.agent import agent_environment

    config = JudgeConfig.from_env()
    assert "sk-judge" not in json.dumps(config.identity()) and "sk-judge" not in repr(config)
    env = agent_environment({"TASK": "alpacaeval"}, {})
    assert not any(k.startswith("AUTORL_JUDGE") for k in env) and "OPENAI_API_KEY" not in env
    assert Judge(config).http.headers["authorization"] == "Bearer sk-judge"


def test_autorl_eval_on_alpacaeval(
    mirror: Path, tmp_path: Path, judge_server: ScriptedJudge, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytest.importorskip("torch", reason="the tiny-model run needs the hf backend (autorl[hf])")
    from autorl.testing import check_benchmark_end_to_end

    monkeypatch.setenv("AUTORL_HOME", str(tmp_path / "home"))
    record = check_benchmark_end_to_end(
        "alpacaeval", limit=4, options={"chat_template": False, "max_new_tokens": 8, "dev_size": 10}
    )
    assert record["extra"]["judge"]["model"] == "judge-test" and record["extra"]["judge_errors"] == 0
    assert record["config"]["benchmark_identity"]["judge"]["model"] == "judge-test"
    assert len(judge_server.calls) == 4


if __name__ == "__main__":  # prints alpaca-eval's own numbers for the LC test's fixed input
    import os
    import tempfile
    import warnings

    with tempfile.TemporaryDirectory() as tmp:
        seed_hub_cache(Path(tmp))
        import huggingface_hub.constants as hc

        hc.HF_HUB_CACHE, hc.HF_HUB_OFFLINE = tmp, True
        os.environ["HF_HUB_OFFLINE"] = "1"
        from alpaca_eval.metrics import get_length_controlled_winrate

        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            m = get_length_controlled_winrate(
                reference_annotations(),
                glm_name="length_controlled_v1",
                save_weights_dir=None,
                is_warn_extreme_changes=False,
            )
        print(
            repr(float(m["win_rate"])), repr(float(m["length_controlled_winrate"])), repr(float(m["lc_standard_error"]))
        )
