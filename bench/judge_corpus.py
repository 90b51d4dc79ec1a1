"""Precision and recall of the judged audit on the planted corpus (``tests/judge_corpus.py``: honest runs and
each kind of cheating, prompt injection aimed at the judge included), with the deterministic audit's beside it.

    python bench/judge_corpus.py                      # the scripted judge of the tests (tests/judge_server.py)
    python bench/judge_corpus.py --model gpt-4o-mini --samples 3 [--budget-usd 2]

With ``--model`` the judge is that model, reached through a gateway of its own started from this process's
environment (``OPENAI_API_KEY``/``OPENAI_BASE_URL`` or ``AUTORL_LLM_UPSTREAMS``, as for a run): the judged audit
exactly as ``autorl audit RUN --judge MODEL`` runs it. A run counts as flagged with a critical or high flag.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT / "src"), str(ROOT)]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--model", help="a real judge model (through the gateway); default: the scripted judge")
    parser.add_argument("--samples", type=int, default=1)
    parser.add_argument("--budget-usd", type=float, default=None)
    args = parser.parse_args()

    from autorl.audit.judge import judge_run
    from autorl.runs.judging import ask_judge
    from tests.gateway_harness import TOKEN, gateway
    from tests.judge_corpus import build, confusion, deterministic_flagged
    from tests.judge_server import judge_server

    with tempfile.TemporaryDirectory() as tmp:
        corpus = build(Path(tmp) / "corpus")
        start = time.perf_counter()
        if args.model:
            flags = {p.name: ask_judge(p.result, Path(tmp) / "home", args.model, samples=args.samples,
                                       budget_usd=args.budget_usd).flags for p in corpus}
        else:
            with judge_server() as (base, _seen), gateway(Path(tmp) / "gw", base) as (gw, _record):
                flags = {p.name: judge_run(p.result, url=gw, token=TOKEN, model="scripted", samples=args.samples).flags
                         for p in corpus}
        judged_s = time.perf_counter() - start
        judged = {n: any(f.severity in ("critical", "high") for f in fs) for n, fs in flags.items()}
        det = deterministic_flagged(corpus)
    for label, predicted in ((f"judge ({args.model or 'scripted'}, {args.samples} sample(s))", judged),
                             ("deterministic audit", det)):
        p, r, n_cheat, n_honest = confusion(predicted, corpus)
        missed = sorted(q.name for q in corpus if q.labels and not predicted[q.name])
        wrong = sorted(q.name for q in corpus if not q.labels and predicted[q.name])
        print(f"{label}: precision {p:.2f}, recall {r:.2f} on {n_cheat} cheating + {n_honest} honest runs; "
              f"missed {missed or 'none'}; false alarms {wrong or 'none'}")
    print(f"judging took {judged_s:.1f} s")


if __name__ == "__main__":
    main()
