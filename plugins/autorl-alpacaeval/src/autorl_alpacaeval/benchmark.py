"""The ``alpacaeval`` benchmark: AlpacaEval 2.0, the small model's answers judged against reference outputs."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any, ClassVar

from autorl import (
    Benchmark,
    EvalConfig,
    EvaluationError,
    Evaluator,
    Item,
    ItemResult,
    Progress,
    has_hidden_items,
    secret_rng,
    write_hidden_items,
    write_jsonl_atomic,
)
from autorl_alpacaeval.data import REFERENCE_SET, load_eval_set, load_train_set, mirror_dir, remove_overlap
from autorl_alpacaeval.judge import ANNOTATOR, Cache, Judge, JudgeConfig

DEV_SIZE, TRAIN_SIZE = 105, 5000
GLM = "length_controlled_v1"  # alpaca-eval's GLM for the weighted_alpaca_eval_gpt4_turbo annotator and its baseline

DESCRIPTION = """# alpacaeval: instruction following, judged (AlpacaEval 2.0)

The model answers open instructions; a judge model compares each answer with a reference model's answer to
the same instruction (AlpacaEval 2.0's reference, GPT-4 Turbo's answers) and says which is better (AlpacaEval's `weighted_alpaca_eval_gpt4_turbo` annotator: the
preference is the judge's probability for the model's answer). The score is the win rate against the
reference, in percent; the record also holds AlpacaEval's length-controlled win rate, which discounts
winning by writing longer. An item the judge cannot answer (after retries) is left out of the win rate, the
length-controlled rate and the comparison with the baseline alike, and counted in the record. The grader prompts with the instruction alone, through the model's chat template,
greedy decoding, at most {max_new_tokens} new tokens.

## Training data (`$DATA_PATH`)
- `train.jsonl`: Alpaca instruction-tuning rows (`instruction`, `input`, `output`), {train_size} of them, with
  every row removed whose instruction is an evaluation instruction or shares a 13-word run with one.
- `overlap_report.json`: what that check removed.

The evaluation instructions and reference answers are hidden; the judge is called by the grader only.
"""


class JudgeEvaluator(Evaluator):
    """Generates every answer (batched), then judges them concurrently against the references.

    An item whose judgement failed after the judge's retries is excluded, not scored 0: it is left out of the
    returned results, so the win rate, the length-controlled rate and the paired comparison (which drops the
    ids either record lists under ``excluded_items``) all stand on the same judged items, and the summary
    counts it (``judge_errors``) and names it with its error (``excluded_items``).
    """

    def __init__(self, benchmark: AlpacaEvalBenchmark) -> None:
        self.benchmark = benchmark
        self.excluded: dict[str, str] = {}

    def evaluate(
        self, benchmark: Benchmark, items: Sequence[Item], backend: Any, progress: Progress | None = None
    ) -> list[ItemResult]:
        cfg = benchmark.config()
        completions = backend.generate([cfg.request(cfg.render(i.input)) for i in items])
        judge = self.benchmark.judge()
        try:
            triples = [
                (i.input["instruction"], (c.texts or [""])[0], i.reference["output"])
                for i, c in zip(items, completions, strict=True)
            ]
            verdicts = judge.judge_all(triples)
        finally:
            judge.close()
            if judge.cache is not None:
                judge.cache.close()
        results = []
        self.excluded = {}
        for item, completion, (_, output, ref), v in zip(items, completions, triples, verdicts, strict=True):
            if v.preference is None:
                self.excluded[item.id] = f"judge: {v.error}"
                continue
            results.append(
                ItemResult(
                    item.id,
                    v.preference,
                    completion.texts,
                    None,
                    {
                        "output_tokens": completion.output_tokens,
                        "index": item.reference["index"],
                        "reference_generator": item.reference["generator"],
                        "output_1": ref,
                        "output_2": output,
                        "preference": v.preference,
                        "judge_prompt_tokens": v.prompt_tokens,
                        "judge_completion_tokens": v.completion_tokens,
                        "judge_cached": v.cached,
                    },
                )
            )
        if progress:
            progress(len(items))
        if items and not results:
            first = next(iter(self.excluded.values()))
            raise EvaluationError(f"the judge answered none of the {len(items)} items ({first})")
        return results

    def summary(self, results: Sequence[ItemResult]) -> dict[str, Any]:
        cfg = self.benchmark.judge_config()
        excluded = dict(self.excluded)
        p_in = sum(int(r.extra.get("judge_prompt_tokens", 0)) for r in results)
        p_out = sum(int(r.extra.get("judge_completion_tokens", 0)) for r in results)
        out: dict[str, Any] = {
            "judge": cfg.identity(),
            "judge_prompt_tokens": p_in,
            "judge_completion_tokens": p_out,
            "judge_cost_usd": round((p_in * cfg.price_in + p_out * cfg.price_out) / 1e6, 6),
            "judge_cached": sum(1 for r in results if r.extra.get("judge_cached")),
            "judge_errors": len(excluded),
            "judged": len(results),
            "excluded_items": excluded,
        }
        out.update(length_controlled(results))
        return out


def to_annotations(results: Sequence[ItemResult]) -> list[dict[str, Any]]:
    """AlpacaEval's annotation records (preference 1: the reference wins, 2: the model wins)."""
    return [
        {
            "instruction": r.id,
            "output_1": r.extra["output_1"],
            "output_2": r.extra["output_2"],
            "generator_1": r.extra["reference_generator"],
            "generator_2": "model",
            "annotator": ANNOTATOR,
            "preference": 1.0 + float(r.extra["preference"]),
            "index": int(r.extra["index"]),
        }
        for r in results
        if r.extra.get("preference") is not None
    ]


def length_controlled(results: Sequence[ItemResult]) -> dict[str, Any]:
    """AlpacaEval's own win rate and length-controlled win rate (its GLM) on these judgements."""
    import warnings

    ann = to_annotations(results)
    if len(ann) < 10:
        return {"length_controlled_winrate": None, "lc_error": f"only {len(ann)} judged items"}
    try:
        from alpaca_eval.metrics import get_length_controlled_winrate

        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            m = get_length_controlled_winrate(ann, glm_name=GLM, save_weights_dir=None, is_warn_extreme_changes=False)
        return {
            "alpaca_eval_win_rate": float(m["win_rate"]),
            "length_controlled_winrate": float(m["length_controlled_winrate"]),
            "lc_standard_error": float(m["lc_standard_error"]),
        }
    except Exception as exc:  # e.g. offline: the GLM needs AlpacaEval's instruction difficulties from the hub
        return {"length_controlled_winrate": None, "lc_error": f"{type(exc).__name__}: {str(exc)[:300]}"}


class AlpacaEvalBenchmark(Benchmark):
    """Options: ``data_dir`` (a local mirror), ``dev_size`` (105 of the 805), ``train_size`` (5000),
    ``max_new_tokens`` (1024), ``chat_template`` (on)."""

    name = "alpacaeval"
    #: ``--benchmark-option`` names and what each takes (anything else is refused before a run starts)
    declared_options: ClassVar[dict[str, Any]] = {
        "max_new_tokens": int,
        "train_size": int,
        "dev_size": int,
        "data_dir": str,
    }
    version = "2"

    eval_config = EvalConfig(prompt_template="{instruction}", chat_template=True, max_new_tokens=1024, temperature=0.0)

    def config(self) -> EvalConfig:
        return super().config().replace(max_new_tokens=int(self.options.get("max_new_tokens", 1024)))

    def description(self) -> str:
        return DESCRIPTION.format(
            max_new_tokens=self.config().max_new_tokens, train_size=int(self.options.get("train_size", TRAIN_SIZE))
        )

    def judge_config(self) -> JudgeConfig:
        return JudgeConfig.from_env()

    def judge(self) -> Judge:
        cache = Cache(self.hidden_dir / "judgements.sqlite") if self.hidden_dir is not None else None
        return Judge(self.judge_config(), cache)

    def identity(self) -> dict[str, Any]:
        return {
            "judge": self.judge_config().identity(),
            "dev_size": int(self.options.get("dev_size", DEV_SIZE)),
            "reference_set": REFERENCE_SET,
            "length_control": GLM,
            "judge_failures": "excluded and counted",
        }

    def _mirror(self) -> Path | None:
        return mirror_dir(self.options.get("data_dir"))

    def hidden_paths(self) -> list[Path]:
        """The local mirror holds the evaluation instructions and references: masked in the sandbox."""
        mirror = self._mirror()
        return [mirror] if mirror is not None and mirror.exists() else []

    def prepare_train_data(self, target_dir: Path) -> None:
        size = int(self.options.get("train_size", TRAIN_SIZE))
        marker = target_dir / "overlap_report.json"
        if marker.is_file() and json.loads(marker.read_text()).get("requested") == size:
            return
        cache = target_dir.parent.parent / "cache" / "alpacaeval-hub"
        eval_rows = load_eval_set(self._mirror(), cache)
        train, report = remove_overlap(load_train_set(self._mirror(), cache), eval_rows)
        train = train[:size]
        target_dir.mkdir(parents=True, exist_ok=True)
        for old in target_dir.iterdir():
            old.unlink()
        write_jsonl_atomic(target_dir / "train.jsonl", train)
        marker.write_text(json.dumps({**report, "requested": size, "written": len(train)}, indent=1))

    def prepare_eval_data(self, hidden_dir: Path) -> None:
        """The 805 with their references, split into dev and test with the installation's secret (the
        instructions are public, AlpacaEval's own; which of them give the agent feedback is not)."""
        marker = hidden_dir / "prepared.json"
        dev_size = int(self.options.get("dev_size", DEV_SIZE))
        want = {"dev_size": dev_size, "reference_set": REFERENCE_SET}
        try:
            if json.loads(marker.read_text()) == want and all(has_hidden_items(hidden_dir, s) for s in self.splits):
                return
        except (OSError, ValueError):
            pass
        rows = load_eval_set(self._mirror(), hidden_dir / "hub")
        order = list(range(len(rows)))
        secret_rng(hidden_dir, "alpacaeval/split").shuffle(order)
        dev = set(order[:dev_size])
        for split in self.splits:
            write_hidden_items(
                hidden_dir,
                split,
                [
                    Item(
                        f"{split}-{i:03d}",
                        {"instruction": r["instruction"]},
                        {"output": r["output"], "generator": str(r.get("generator", "reference")), "index": i},
                    )
                    for i, r in enumerate(rows)
                    if (i in dev) == (split == "dev")
                ],
            )
        marker.write_text(json.dumps(want))

    def evaluator(self) -> JudgeEvaluator:
        return JudgeEvaluator(self)

    def score(self, item: Item, completion: str) -> float:
        raise NotImplementedError("alpacaeval is scored by the judge (JudgeEvaluator)")
