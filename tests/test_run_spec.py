"""One RunSpec says what a run is: ``autorl.run()`` builds it (its checks refuse a bad run before anything starts),
a study's cells build the same one and hand ``autorl run`` its flags; a run's limits are one ``Limits`` and a limit
reached is one ``LimitReached`` family with its kind as data."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

import autorl
from autorl.errors import (
    OUTPUT_BYTES,
    SUBMISSIONS,
    TOKENS,
    USD,
    AutorlError,
    BudgetSpent,
    LimitReached,
    UsageError,
    budget_kind,
    http_status,
)
from autorl.runs.spec import AuditSettings, Limits, RunSpec

from .conftest import echo_answers, write_stub_checkpoint
from .test_run import agent_folder


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"timeout": 0}, "--timeout must be a positive number of seconds"),
        ({"audit_budget_s": -1.0}, "--audit-budget must be a positive number of seconds"),
        ({"audit_judge": " "}, "--audit-judge needs a model name and --audit-judge-samples at least 1"),
        ({"audit_judge": "judge-model", "audit_judge_samples": 0}, "--audit-judge needs a model name"),
        ({"limit": 0}, "--limit must be a positive number of items, not 0"),
        ({"keep": "newest"}, "--keep must be one of best, selected, all, not 'newest'"),
        ({"port": 70000}, "--port must be between 1 and 65535, not 70000"),
        ({"llm_budget_usd": 0.0}, "--llm-budget-usd must be a positive number of US dollars"),
        ({"llm_budget_usd": float("nan")}, "--llm-budget-usd must be a positive number of US dollars"),
        ({"llm_budget_tokens": -5}, "--llm-budget-tokens must be a positive number of tokens"),
        ({"output_quota_gb": -1.0}, "--output-quota must be a non-negative number of GiB, not -1.0"),
    ],
)
def test_a_bad_run_is_refused_in_one_line_before_anything_starts(
    home: Path, changes: dict[str, Any], message: str
) -> None:
    args: dict[str, Any] = {"agent": "example", "task": "arith", "model": "autorl:tiny", "timeout": 60.0, **changes}
    with pytest.raises(UsageError) as refused:
        autorl.run(args.pop("agent"), args.pop("task"), args.pop("model"), args.pop("timeout"), **args)
    assert str(refused.value).startswith(message) and "\n" not in str(refused.value)
    assert not home.exists() or not any(home.iterdir())  # no workspace, no model built, no ledger


def test_a_spec_holds_plain_copies_of_what_it_was_given() -> None:
    env = {"A": "1"}
    options: dict[str, Any] = {"n": 3}
    spec = RunSpec.build(
        "example",
        "arith",
        "autorl:tiny",
        30,
        agent_env=env,
        benchmark_options=options,
        runs_dir="~/runs",
        off_target=["echo"],
        llm_budget_tokens=500,
        audit_judge="j",
        audit_judge_samples=3,
    )
    env["A"], options["n"] = "2", 4  # the caller's mappings changed later leave the run as it was asked
    assert spec.agent_env == {"A": "1"} and spec.benchmark_options == {"n": 3}
    assert spec.limits == Limits(time_s=30, tokens=500) and spec.timeout == 30
    assert spec.audit == AuditSettings(judge="j", judge_samples=3) and spec.audit.judged == ("j", 3)
    assert spec.runs_dir == Path("~/runs") and spec.off_target == ("echo",)
    with pytest.raises(AttributeError):
        spec.seed = 3  # type: ignore[misc]  # frozen: what a run is does not change while it runs


def _parsed(args: list[str]) -> dict[str, Any]:
    """``autorl run``'s parameters as its command line parses ``args``."""
    import typer

    from autorl.cli.app import app

    run = typer.main.get_command(app).commands["run"]  # type: ignore[attr-defined]
    return dict(run.make_context("run", list(args)).params)


def test_a_cells_flags_parse_back_into_the_run_it_describes(tmp_path: Path) -> None:
    """A study's cell and ``autorl run`` describe one run: the flags a cell hands ``autorl run`` (its RunSpec's
    ``cli_args``) are parsed by the real command line into the same spec, field by field."""
    from autorl.sweep.keys import Resolver
    from autorl.sweep.spec import expand_options

    (cell_options,) = expand_options(
        {
            "agent": "example",
            "task": "arith",
            "model": "autorl:tiny",
            "timeout": 90,
            "seed": 7,
            "limit": 12,
            "backend": "hf",
            "sandbox": "none",
            "network": "off",
            "audit": False,
            "audit_budget": 30,
            "agent_env": {"B": "two words", "A": 1},
            "agent_credentials": ["SETTING"],
            "benchmark_options": {"chat_template": True},
            "decoys": False,
            "llm_budget_usd": 1.5,
            "llm_budget_tokens": 10000,
            "audit_judge": "judge-model",
            "audit_judge_samples": 3,
            "test_all": False,
            "off_target": ["echo"],
        }
    )
    cell = Resolver().identify(cell_options)
    spec = cell.run_spec()
    p = _parsed(cell.run_args())
    from autorl.cli.options import parse_pairs

    again = RunSpec.build(
        p["agent"],
        p["task"],
        p["model"],
        p["timeout"],
        seed=p["seed"],
        limit=p["limit"],
        backend=p["backend"],
        sandbox=p["sandbox"],
        network=p["network"],
        audit=not p["no_audit"],
        audit_budget_s=p["audit_budget"],
        agent_env=parse_pairs(p["agent_env"], "--agent-env", json_values=False, key="NAME"),
        agent_credentials=tuple(p["agent_credential"]),
        benchmark_options=parse_pairs(p["benchmark_option"], "--benchmark-option"),
        decoys=not p["no_decoys"],
        llm_budget_usd=p["llm_budget_usd"],
        llm_budget_tokens=p["llm_budget_tokens"],
        audit_judge=p["audit_judge"],
        audit_judge_samples=p["audit_judge_samples"],
        test_all=not p["no_test_all"],
        off_target=tuple(p["off_target"]),
        keep=p["keep"],
        output_quota_gb=p["output_quota"],
        gpus=p["gpus"],
        runs_dir=p["runs_dir"],
        llm_prices=p["llm_prices"],
        port=p["port"],
    )
    assert again == spec
    assert spec.agent_env == {"A": "1", "B": "two words"} and spec.limits == Limits(90.0, None, 10000, 1.5)
    # the worker adds the runs' folder and the GPUs: a spec that has them says so too
    full = RunSpec.build(
        "example",
        "arith",
        "autorl:tiny",
        5,
        gpus="agent=0,grader=1",
        runs_dir=tmp_path,
        keep="all",
        output_quota_gb=2.0,
    )
    p = _parsed(full.cli_args())
    assert (p["gpus"], p["runs_dir"], p["keep"], p["output_quota"]) == ("agent=0,grader=1", tmp_path, "all", 2.0)
    # what autorl run has no flag for is refused rather than dropped
    with pytest.raises(UsageError, match="cannot be given eval_timeout, submissions"):
        RunSpec("example", "arith", "m", Limits(5, submissions=3), eval_timeout=60).cli_args()


def test_a_cells_flags_are_those_studies_always_gave() -> None:
    """``payload.json`` keeps a cell's flags: a spec of defaults gives the same list, in the same order, as before."""
    from autorl.sweep.keys import Resolver
    from autorl.sweep.spec import expand_options

    (options,) = expand_options({"agent": "example", "task": "arith", "model": "autorl:tiny", "timeout": 60})
    assert Resolver().identify(options).run_args() == [
        "--agent",
        "example",
        "--task",
        "arith",
        "--model",
        "autorl:tiny",
        "--timeout",
        "60.0",
        "--seed",
        "0",
        "--sandbox",
        "auto",
        "--network",
        "on",
        "--audit-budget",
        "900.0",
    ]


def test_a_limit_reached_is_one_family_with_its_kind() -> None:
    from autorl.agents import llm_loop
    from autorl.gateway.budget import BudgetSpent as GatewaySpent
    from autorl.gateway.budget import Meter
    from autorl.grader.quota import QuotaExceeded

    assert GatewaySpent is BudgetSpent and llm_loop.BudgetSpent is BudgetSpent  # one class, not two meanings
    meter = Meter(prices={"m": {"input": 1.0, "output": 1.0}}, budget_tokens=100, min_output=10)
    with pytest.raises(LimitReached) as spent:
        meter.reserve("m", 95, 50)
    assert spent.value.kind == TOKENS and isinstance(spent.value, BudgetSpent) and http_status(spent.value) == 429
    dollars = Meter(prices={"m": {"input": 1e6, "output": 1e6}}, budget_usd=0.5, min_output=10)
    with pytest.raises(BudgetSpent) as spent:
        dollars.reserve("m", 1, 50)
    assert spent.value.kind == USD
    quota = QuotaExceeded("your files take 9 GiB")
    assert isinstance(quota, LimitReached) and quota.kind == OUTPUT_BYTES and http_status(quota) == 507
    submissions = LimitReached("the run's limit of 3 submissions is reached")
    assert submissions.kind == SUBMISSIONS and http_status(submissions) == 429
    assert all(isinstance(e, AutorlError) for e in (quota, submissions, spent.value))


def test_the_agents_loop_names_the_budget_the_gateway_refused() -> None:
    assert (
        budget_kind('{"error": {"message": "the run\'s LLM token budget is spent (90 of 100 tokens used, ..."}}')
        == TOKENS
    )
    assert budget_kind("the run's LLM budget is spent (USD 0.5000 of 0.5000 used)") == USD


@pytest.mark.e2e
def test_a_runs_submission_limit_holds(home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``Limits.submissions`` is the grader's quota: past it, a submission is refused (429) and never scored."""
    from autorl.runs.runner import run_spec

    monkeypatch.setenv("AUTORL_SANDBOX_RO", str(Path(__file__).resolve().parent))
    base = write_stub_checkpoint(tmp_path / "stub-base", {**echo_answers(5), **echo_answers(6, "test")})
    agent = agent_folder(
        tmp_path / "agents",
        "twice",
        """
        make_ckpt v1 12 null 21
        submit v1 > "$WORKSPACE/code/first.json"
        make_ckpt v2 13 null 22
        curl -s -o "$WORKSPACE/code/second.json" -w '%{http_code}' -X POST "$GRADING_SERVER_URL/submit" \\
            -H "Content-Type: application/json" -H "Authorization: Bearer $AUTORL_TOKEN" \\
            -d "{\\"model_path\\": \\"$OUTPUT_DIR/v2\\"}" > "$WORKSPACE/code/second.status"
        """,
    )
    spec = RunSpec(
        str(agent),
        "echo",
        str(base),
        Limits(time_s=60, submissions=1),
        backend="scripted",
        sandbox="none",
        audit=AuditSettings(enabled=False),
        decoys=False,
    )
    result = run_spec(spec, log=lambda _: None)
    code = Path(str(result.row["workspace"])) / "code"
    assert (code / "second.status").read_text() == "429"
    assert "limit of 1 submissions is reached" in json.loads((code / "second.json").read_text())["error"]
    assert [s["submission_id"] for s in result.submissions] == [1] and result.row["success"] is True
