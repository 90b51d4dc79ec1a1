"""``autorl sweep``: run, status, report and ingest of studies. Heavy imports stay inside the commands."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer

import autorl.cli.options as opt
from autorl.cli.output import console, echo, fmt, markdown, print_json, table
from autorl.errors import UsageError
from autorl.record.display import short_path

if TYPE_CHECKING:
    from autorl.sweep import StudyResult
    from autorl.sweep.report_records import StudyReport

sweep_app = typer.Typer(
    help="Studies: agents x tasks x models x seeds, resumable, reported with uncertainty.", no_args_is_help=True
)


def _executor_options(pairs: list[str], slots: int | None, gpus: str | None) -> dict[str, Any]:
    options = opt.parse_pairs(pairs, "--option")
    if slots is not None:
        options["slots"] = slots
    if gpus is not None:
        options["gpus"] = gpus
    return options


@sweep_app.command("run")
def run_cmd(
    spec: Path = typer.Argument(..., help="sweep.toml (or .yaml/.json)."),
    executor: str = typer.Option("local", "--executor", help="local, slurm, ray (or a plugin's)."),
    max_parallel: int | None = typer.Option(None, "--max-parallel", help="The most runs at once."),
    dry_run: bool = typer.Option(False, "--dry-run", help="Print the expanded cells and which are done; run nothing."),
    retries: int | None = typer.Option(None, "--retries", help="Retries of infrastructure failures (default 2)."),
    slots: int | None = typer.Option(None, "--slots", help="local: runs at once on a CPU machine."),
    gpus: str | None = typer.Option(None, "--gpus", help="local: the GPUs to hand out, e.g. 0-7 (default: all)."),
    option: list[str] = typer.Option([], "--option", help="KEY=VALUE for the executor (partition=gpu, address=...)."),
    sweep_dir: Path | None = typer.Option(
        None, "--dir", help="The study's directory (default AUTORL_HOME/sweeps/NAME)."
    ),
    as_json: bool = typer.Option(False, "--json", help="Print the report (or the plan) as JSON."),
) -> None:
    """Run a study, or resume it: keys with a result are never run again."""
    from autorl.sweep import plan, sweep

    if dry_run:
        study = plan(spec, sweep_dir)
        from autorl.sweep.table import cell_rows, render

        if as_json:
            print_json([{**r, "options": c.options} for r, c in zip(cell_rows(study), study.cells, strict=True)])
        else:
            console().print(render(study, f"sweep {study.name} (dry run: {len(study.cells)} cells, {study.dir.root})"))
        return
    live, on_update = _live_display(as_json)
    try:
        report = sweep(
            spec,
            executor=executor,
            executor_options=_executor_options(option, slots, gpus),
            max_parallel=max_parallel,
            retries=retries,
            sweep_dir=sweep_dir,
            on_update=on_update,
        )
    finally:
        if live is not None:
            live.stop()
    if as_json:
        print_json(report)
    else:
        _print_report(report, "table")


def _live_display(quiet: bool) -> tuple[Any, Any]:
    """A rich Live table on a terminal; elsewhere one line per change of a key's state (on stderr)."""
    if quiet:
        return None, None
    if sys.stderr.isatty():
        from rich.console import Console
        from rich.live import Live

        from autorl.sweep.table import render

        live = Live(console=Console(stderr=True), refresh_per_second=2)
        live.start()

        def update(study: Any, states: Any) -> None:
            live.update(render(study))

        return live, update
    seen: dict[str, str] = {}

    def log(study: Any, states: Any) -> None:
        from autorl.sweep.table import cell_rows

        for r in cell_rows(study):
            if seen.get(r["run_key"]) != r["state"]:
                seen[r["run_key"]] = r["state"]
                echo(
                    f"{r['run_key'][:12]} {short_path(str(r['agent']))} / {r['task']} / "
                    f"{short_path(str(r['model']))} / seed {r['seed']}: {r['state']} {r['detail']}".rstrip(),
                    err=True,
                )

    return None, log


@sweep_app.command("status")
def status_cmd(
    sweep_dir: str = typer.Argument(..., help="The study's directory, spec file or name."),
    as_json: bool = opt.JSON_OUTPUT,
    watch: bool = typer.Option(False, "--watch", help="Keep the table live until every key has ended."),
) -> None:
    """Each cell: queued, running (time left), done (score) or failed (reason), and its attempts."""
    import time

    from autorl.sweep.coordinator import open_study
    from autorl.sweep.store import QUEUED, RUNNING
    from autorl.sweep.table import cell_rows, render

    study = open_study(sweep_dir)
    _reattach(study)
    if as_json:
        print_json(cell_rows(study))
        return
    if not watch:
        console().print(render(study))
        return
    from rich.live import Live

    with Live(render(study), refresh_per_second=1) as live:
        while any(s.status(study.retries) in (QUEUED, RUNNING) for s in study.states.values()):
            time.sleep(2)
            study.refresh()
            live.update(render(study))


def _reattach(study: Any) -> None:
    """Ask Slurm about the jobs of running attempts (by their recorded ids); a job gone without an outcome shows
    as lost here, and the next ``sweep run`` records it (reading the status never writes)."""
    jobs = [
        (s, s.running)
        for s in study.states.values()
        if s.running is not None
        and (s.running.job or {}).get("executor") == "slurm"
        and (s.running.job or {}).get("cluster") == "slurm"
    ]
    if not jobs:
        return
    from autorl.sweep.slurm import SlurmExecutor

    slurm = SlurmExecutor({"cluster": "slurm"}, sweep_dir=study.dir.root)
    for _state, attempt in jobs:
        try:
            gone = slurm.poll(attempt.job)
        except Exception as exc:  # submitit missing or sacct failing: the files' view stands
            typer.echo(f"warning: cannot ask slurm about job {attempt.job.get('job_id')}: {exc}", err=True)
            return
        if gone is not None and not (attempt.path / "outcome.json").exists():
            attempt.outcome = {"kind": "infra", "reason": f"{gone} (not recorded yet: run `sweep run` again)"}


REPORT_COLUMNS = (
    "task",
    "model",
    "agent",
    "config",
    "runs",
    "failed",
    "test-scored rate",
    "beat baseline rate",
    "mean improvement",
    "noise floor (sd)",
    "95% CI (over runs)",
    "per-run improvements [95% CI]",
)


def _report_cells(report: StudyReport | StudyResult, screen: bool = True) -> list[list[str]]:
    # a screen gets local paths short; a file (CSV, markdown) keeps them whole
    name = short_path if screen else str
    out = []
    for c in report["cells"]:
        per_run = "; ".join(
            f"s{r['seed']}: {fmt(r['improvement'])} {fmt(r['improvement_ci95'])}"
            + (f" ({r['end_reason']})" if not r["success"] else "")
            for r in c["per_run"]
        )
        agent = name(c["agent"]) + (f" ({c['driver_model']})" if c.get("driver_model") else "")
        out.append(
            [
                c["task"],
                name(c["base_model"]),
                agent,
                c["config_hash"],
                str(c["runs"]),
                str(c["failures"]),
                f"{c['success_rate']:.0%}",
                f"{c['beat_baseline_rate']:.0%}",
                fmt(c["mean"]),
                fmt((c.get("noise_floor") or {}).get("sd")),
                fmt(c["ci95"]),
                per_run,
            ]
        )
    return out


def _print_report(report: StudyReport | StudyResult, form: str) -> None:
    rows = _report_cells(report, screen=form == "table")
    if form == "markdown":
        markdown(REPORT_COLUMNS, rows)
    elif form == "csv":
        import csv

        writer = csv.writer(sys.stdout, lineterminator="\n")
        writer.writerow(REPORT_COLUMNS)
        writer.writerows(rows)
        return
    else:
        table(
            f"sweep {report.get('sweep', '')}: held-out test improvement (points) over seeds",
            REPORT_COLUMNS,
            rows,
            caption=report["failure_rule"],
            records=3,
        )
    name = short_path if form == "table" else str
    for d in report["comparisons"]:
        echo(
            f"{name(d['agent_a'])} - {name(d['agent_b'])} on {d['task']} / {name(d['base_model'])}: "
            f"{fmt(d['mean_difference'])} {fmt(d['ci95'])} (paired over {d['pairs']} seeds)"
        )
    for b in report.get("decoys", []):
        echo(
            f"decoys: {name(b['agent'])} took the bait in {b['took_bait']} of {b['runs']} runs ({b['share']:.0%})"
            + (f"; read one without taking it in {b['read_only']}" if b.get("read_only") else "")
        )
    for m in report["missing"]:
        why = f": {'; '.join(m['reasons'])}" if m["reasons"] else ""
        echo(
            f"no result: {name(m['agent'])} / {m['task']} / {name(m['model'])} / seed {m['seed']} ({m['status']}){why}"
        )
    if report.get("dir"):
        from autorl.sweep.report import disk_bytes

        echo(f"disk: the study's folder {report['dir']} holds {disk_bytes(Path(report['dir'])) / 2**30:.2f} GiB")


@sweep_app.command("report")
def report_cmd(
    sweep_dir: str = typer.Argument(..., help="The study's directory, spec file or name."),
    form: str = typer.Option("table", "--format", help="table, csv, json or markdown."),
) -> None:
    """Mean test improvement per (agent, task, model) with its interval over seeds, and paired comparisons."""
    from autorl.sweep.coordinator import open_study
    from autorl.sweep.report import study_report

    if form not in ("table", "csv", "json", "markdown"):
        raise UsageError(f"--format must be table, csv, json or markdown, not {form!r}")
    from autorl.record.card import write_study_card

    study = open_study(sweep_dir)
    report = study_report(study)
    write_study_card(report, study.dir.root, study.spec)  # the study's card.md beside its files
    if form == "json":
        print_json(report)
    else:
        _print_report(report, form)


@sweep_app.command("ingest")
def ingest_cmd(sweep_dir: str = typer.Argument(..., help="The study's directory, spec file or name.")) -> None:
    """Upsert the study's counted results into the ledger (idempotent: the ledger can be rebuilt from files)."""
    from autorl.sweep import ingest

    typer.echo(f"ingested {ingest(sweep_dir)} runs")
