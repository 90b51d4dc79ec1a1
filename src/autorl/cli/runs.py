"""``autorl run``, ``recover`` and ``clean``: making a run, recording a lost one, and freeing what a recorded run no
longer needs (what is recorded is read by :mod:`autorl.cli.records`)."""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import typer

import autorl.cli.options as opt
from autorl.cli.output import echo, fmt, fmt_p, print_json, table
from autorl.errors import UsageError
from autorl.record.display import fmt_ci, fmt_signed
from autorl.record.schema import FlagRecord, RowRecord


def run_cmd(
    agent: str = typer.Option(..., "--agent", help="Agent name, or a folder with config.yaml + start.sh."),
    task: str = opt.TASK,
    model: str = typer.Option(..., "--model", help="Local dir, hub id (org/name[@rev]) or autorl:tiny."),
    timeout: float = typer.Option(..., "--timeout", help="The agent's time budget in seconds."),
    port: int | None = typer.Option(None, "--port", help="Grader port (default: a free one)."),
    backend: str | None = opt.BACKEND,
    gpus: str | None = typer.Option(None, "--gpus", help="e.g. agent=0-2,grader=3"),
    runs_dir: Path | None = typer.Option(None, "--runs-dir", help="Where workspaces go (default AUTORL_HOME/runs)."),
    seed: int = typer.Option(0, "--seed", help="Recorded; passed to the agent as AUTORL_SEED."),
    agent_env: list[str] = typer.Option([], "--agent-env", help="NAME=VALUE for the agent (repeatable)."),
    agent_credential: list[str] = typer.Option(
        [],
        "--agent-credential",
        help="Pass this variable of your environment to the agent (repeatable; never a "
        "model API key: the LLM gateway holds those).",
    ),
    limit: int | None = typer.Option(None, "--limit", help="Evaluate only the first N items per split."),
    benchmark_option: list[str] = opt.BENCHMARK_OPTIONS,
    sandbox: str = typer.Option(
        "auto", "--sandbox", help="auto (bwrap where it works, else none with a warning), bwrap or none."
    ),
    network: str = typer.Option("on", "--network", help="on, or off: the agent reaches only the grader (bwrap)."),
    no_audit: bool = typer.Option(False, "--no-audit", help="Skip the cheat audit at the end (autorl audit runs it)."),
    off_target: list[str] = typer.Option(
        [],
        "--off-target",
        help="After the run, score the selected checkpoint and the base on this "
        "benchmark too (repeatable): the change elsewhere, flagged when it "
        "is significantly negative.",
    ),
    no_test_all: bool = typer.Option(
        False,
        "--no-test-all",
        help="Skip scoring every distinct submission on test (the optimistic "
        "best-of-k peer figure; the headline is unchanged).",
    ),
    audit_budget: float = typer.Option(900.0, "--audit-budget", help="The audit's time budget in seconds."),
    no_decoys: bool = typer.Option(
        False, "--no-decoys", help="Plant no decoys (leaked-looking answers and tokens whose use is recorded)."
    ),
    llm_budget_usd: float | None = typer.Option(
        None, "--llm-budget-usd", help="The LLM gateway refuses the agent's model calls past this cost."
    ),
    llm_budget_tokens: int | None = typer.Option(
        None, "--llm-budget-tokens", help="The same, in prompt + completion tokens."
    ),
    llm_prices: Path | None = typer.Option(
        None, "--llm-prices", help="YAML/JSON price table (model: {input, output, cached_input} USD/M)."
    ),
    as_json: bool = typer.Option(False, "--json", help="Print the result as JSON."),
    audit_judge: str | None = typer.Option(None, "--audit-judge", help="Also ask this judge model after the audit."),
    audit_judge_samples: int = typer.Option(1, "--audit-judge-samples", help="Judge samples (a majority decides)."),
    keep: str = typer.Option(
        "best",
        "--keep",
        help="Checkpoints kept once scored, by the grader and in the agent's output: best "
        "(dev-best and test-best), selected (the dev-best, the grader's copy), all.",
    ),
    output_quota: float | None = typer.Option(
        None,
        "--output-quota",
        help="GiB the agent's workspace and /tmp may hold when it submits "
        "(default 8x the base model's weights, at least 4; 0: none).",
    ),
) -> None:
    """Run an agent on a task and record baseline, scores and improvement."""
    from autorl.runs.runner import run

    result = run(
        agent,
        task,
        model,
        timeout,
        port=port,
        backend=backend,
        gpus=gpus,
        runs_dir=runs_dir,
        seed=seed,
        agent_env=opt.parse_pairs(agent_env, "--agent-env", json_values=False, key="NAME"),
        agent_credentials=agent_credential,
        limit=limit,
        sandbox=sandbox,
        network=network,
        benchmark_options=opt.parse_pairs(benchmark_option, "--benchmark-option"),
        audit=not no_audit,
        audit_budget_s=audit_budget,
        llm_budget_usd=llm_budget_usd,
        llm_budget_tokens=llm_budget_tokens,
        llm_prices=llm_prices,
        audit_judge=audit_judge,
        audit_judge_samples=audit_judge_samples,
        decoys=not no_decoys,
        test_all=not no_test_all,
        off_target=off_target,
        keep=keep,
        output_quota_gb=output_quota,
    )
    if as_json:
        print_json(result.row)
    else:
        _print_run(result.row, result.audit, result.meta)
    if result.meta.get("interrupted"):  # recorded; the shell still learns the run was interrupted
        from autorl.runs.interrupt import exit_code

        sys.exit(exit_code(str(result.meta["interrupted"])))


def _print_run(r: RowRecord, audit: Sequence[FlagRecord], meta: dict[str, Any]) -> None:
    table(
        f"run {r['run_id']}",
        ["", "test (the result)", f"dev (best of {r['dev_k']}, optimistic)"],
        [
            ["baseline", fmt(r["baseline"]), fmt(r["dev_baseline"])],
            ["score", fmt(r["best_score"]), fmt(r["dev_best"])],
            ["improvement", fmt(r["improvement"]), fmt(r["dev_improvement"])],
            ["improvement 95% CI", fmt(r["improvement_ci95"]), fmt(r["dev_improvement_ci95"])],
            ["p-value", fmt_p(r["p_value"]), "-"],
        ],
    )
    yes = {True: "yes", False: "no"}
    prepared = meta.get("prepare_s")
    echo(
        f"submissions: {r['submissions']}; finished with a test score: {yes[bool(r['success'])]}; "
        f"beat baseline: {yes[bool(r.get('beat_baseline'))]} ({r['end_reason']})"
    )
    echo(
        f"duration: {r['duration_s']:.0f} s"
        + (f" (preparing the model and data took {prepared:.0f} s before it)" if prepared else "")
        + f"; sandbox: {r['sandbox']}"
    )
    echo(f"workspace: {r['workspace']}", whole_words=True)
    if r["best_score"] is None:
        echo("no test score: this run has no result (the dev figures are the agent's feedback, not a result)")
    for entry in r.get("off_target") or []:
        if entry.get("error"):
            echo(f"off-target {entry.get('task')}: not scored ({entry['error']})")
        else:
            echo(
                f"off-target {entry.get('task')} ({entry.get('split', 'test')}): base {fmt(entry.get('base'))}, "
                f"selected {fmt(entry.get('selected'))}, change {fmt_signed(entry.get('change'))} "
                f"{fmt_ci(entry.get('ci95'))}" + (": regressed" if entry.get("regressed") else "")
            )
    for flag in audit:
        echo(f"audit flag: {flag['name']} ({flag['severity']}): {flag['detail']}")


def recover(
    run_id: str | None = typer.Argument(None, help="The lost run's id (see `autorl doctor`)."),
    every: bool = typer.Option(False, "--all", help="Every run whose orchestrator is gone."),
    eval_timeout: float = typer.Option(3600.0, "--eval-timeout", help="Seconds to wait for evaluations in flight."),
    no_test: bool = typer.Option(False, "--no-test", help="Do not score the best submission on the test split."),
    no_audit: bool = typer.Option(False, "--no-audit", help="Do not run the audit."),
    as_json: bool = opt.JSON_OUTPUT,
) -> None:
    """Record runs whose orchestrator died (killed, preempted, node lost) from their grader's store."""
    from autorl.resources import autorl_home
    from autorl.runs.recover import recover as recover_run
    from autorl.runs.recover import recover_all

    if (run_id is None) == (not every):
        raise UsageError("give a run id or --all (not both)")
    options: dict[str, Any] = {"eval_timeout": eval_timeout, "final_test": not no_test, "audit": not no_audit}
    home = autorl_home()
    done = recover_all(home=home, **options) if every else [recover_run(str(run_id), home=home, **options)]
    if as_json:
        print_json([d.to_dict() for d in done])
        return
    if not done:
        typer.echo("no lost run to recover")
    for d in done:
        typer.echo(
            f"run {d.run_id}: {d.action}: {d.row.get('submissions')} submissions, test score "
            f"{fmt(d.row.get('test_score'))}; {d.row.get('end_reason')}"
        )


def clean(
    run_ids: list[str] = typer.Argument(None, help="Runs to clean (default: every recorded run)."),
    keep: str = typer.Option(
        "selected",
        "--keep",
        help="What stays: selected (the dev-best, the grader's copy) "
        "or best (also the test-best, and the agent's copies).",
    ),
    older_than: float | None = typer.Option(None, "--older-than", help="Only runs recorded at least DAYS ago."),
    dry_run: bool = typer.Option(False, "--dry-run", help="Say what would be deleted; delete nothing."),
    as_json: bool = typer.Option(False, "--json", help="Print what was done as JSON."),
) -> None:
    """Delete the checkpoints of recorded runs that their keep policy no longer needs (the records stay)."""
    from autorl.resources import autorl_home
    from autorl.runs.clean import clean_runs

    done = clean_runs(autorl_home(), run_ids or (), older_than_days=older_than, policy=keep, dry_run=dry_run)
    if as_json:
        print_json(done)
        return
    verb = "would free" if dry_run else "freed"
    for d in done:
        echo(
            f"{d['run_id']}: {verb} {d['freed_bytes'] / 2**30:.2f} GiB ({len(d['pruned'])} checkpoints)"
            + (f"; {d['note']}" if d.get("note") else "")
        )
    total = sum(int(d["freed_bytes"]) for d in done)
    echo(f"{len(done)} runs: {verb} {total / 2**30:.2f} GiB")
