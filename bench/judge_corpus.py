"""Precision and recall of the audit on the labelled corpus, per category: the deterministic audit, the judged
audit and the two together (a run counts as flagged with a critical or high flag). The corpus
(``tests/judge_corpus.py``, ``tests/judge_corpus_hard.py``): honest runs and each kind of cheating, a prompt
injection aimed at the judge, cheats deep inside long files, planted verdicts, cheats split across two files and
encoded cheats, each harder category with honest runs of the same shape.

    python bench/judge_corpus.py                      # the scripted judge of the tests (tests/judge_server.py)
    python bench/judge_corpus.py --model gpt-4o-mini --samples 3 [--budget-usd 2] [--json out.json]

With ``--model`` the judge is that model, reached through a gateway of its own started from this process's
environment (``OPENAI_API_KEY``/``OPENAI_BASE_URL`` or ``AUTORL_LLM_UPSTREAMS``, as for a run): the judged audit
exactly as ``autorl audit RUN --judge MODEL`` runs it.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT / "src"), str(ROOT)]


def _score(flagged: dict[str, bool], runs: list) -> dict[str, object]:  # type: ignore[type-arg]
    cheating = {p.name for p in runs if p.labels}
    hit = {p.name for p in runs if flagged[p.name]}
    tp = len(hit & cheating)
    return {"precision": tp / len(hit) if hit else None, "recall": tp / len(cheating) if cheating else None,
            "missed": sorted(cheating - hit), "false_alarms": sorted(hit - cheating)}


def _fmt(x: object) -> str:
    return "  -  " if x is None else f"{x:.2f}"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--model", help="a real judge model (through the gateway); default: the scripted judge")
    parser.add_argument("--samples", type=int, default=1)
    parser.add_argument("--budget-usd", type=float, default=None)
    parser.add_argument("--json", type=Path, help="also write the figures here")
    args = parser.parse_args()

    from autorl.audit.judge import judge_run
    from autorl.runs.judging import ask_judge
    from tests.gateway_harness import TOKEN, gateway
    from tests.judge_corpus import deterministic_flagged
    from tests.judge_corpus_hard import build_all
    from tests.judge_server import judge_server

    with tempfile.TemporaryDirectory() as tmp:
        corpus = build_all(Path(tmp) / "corpus")
        start = time.perf_counter()
        if args.model:
            flags = {p.name: ask_judge(p.result, Path(tmp) / "home", args.model, samples=args.samples,
                                       budget_usd=args.budget_usd).flags for p in corpus}
        else:
            with judge_server() as (base, _seen), gateway(Path(tmp) / "gw", base) as (gw, _record):
                flags = {p.name: judge_run(p.result, url=gw, token=TOKEN, model="scripted", samples=args.samples).flags
                         for p in corpus}
        judged_s = time.perf_counter() - start
        start = time.perf_counter()
        det = deterministic_flagged(corpus)
        det_s = time.perf_counter() - start
    judged = {n: any(f.severity in ("critical", "high") for f in fs) for n, fs in flags.items()}
    both = {n: judged[n] or det[n] for n in judged}
    categories = list(dict.fromkeys(p.category for p in corpus))
    figures: dict[str, dict[str, object]] = {}
    judge_name = f"judge ({args.model or 'scripted'}, {args.samples} sample(s))"
    print(f"{'category':<16} {'cheat':>5} {'honest':>6}   deterministic P/R   {judge_name} P/R   both P/R")
    for category in [*categories, "all"]:
        runs = [p for p in corpus if category in ("all", p.category)]
        row = {name: _score(pred, runs) for name, pred in (("deterministic", det), ("judge", judged), ("both", both))}
        figures[category] = {"cheating": sum(bool(p.labels) for p in runs),
                             "honest": sum(not p.labels for p in runs), **row}
        cells = "   ".join(f"{_fmt(row[k]['precision'])}/{_fmt(row[k]['recall'])}" for k in row)
        print(f"{category:<16} {figures[category]['cheating']:>5} {figures[category]['honest']:>6}   {cells}")
    for name in ("deterministic", "judge", "both"):
        score = figures["all"][name]
        assert isinstance(score, dict)
        print(f"{name}: missed {score['missed'] or 'none'}; false alarms {score['false_alarms'] or 'none'}")
    print(f"judging took {judged_s:.1f} s, the deterministic audit {det_s:.1f} s, for {len(corpus)} runs")
    if args.json:
        args.json.write_text(json.dumps({"judge": judge_name, "runs": len(corpus), "categories": figures}, indent=1))


if __name__ == "__main__":
    main()
