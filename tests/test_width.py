"""Every table and line the command line prints fits the screen: 80 columns when COLUMNS says 80 (or nothing says
anything), wider when COLUMNS is wider; a study's 32-character run ids are shortened to a prefix that the commands
taking a run id accept."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from .conftest import cli, write_stub_checkpoint
from .test_sweep import FAKE_RUN, _agents


@pytest.fixture(scope="module")
def study(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """A home whose ledger holds a study of 2 agents x 2 seeds (fake runs: 32-character run ids) and a study
    folder to report on, with long agent and model names."""
    root = tmp_path_factory.mktemp("width")
    # rows as today's runs record them: the headline is the test split, k dev submissions scored
    (root / "fake_run.py").write_text(
        FAKE_RUN.replace('"config_hash": "cfg",', '"config_hash": "cfg", "dev_k": 3, "beat_baseline": improvement > 1,')
    )
    env = {
        "AUTORL_HOME": str(root / "home"),
        "AUTORL_SWEEP_RUN_PROGRAM": f"{sys.executable} {root / 'fake_run.py'}",
        "FAKE_RUN_LOG": str(root / "runs.jsonl"),
        "AUTORL_SWEEP_SCRATCH": str(root / "scratch"),
    }
    model = write_stub_checkpoint(root / "Qwen2.5-Math-1.5B-Instruct-with-a-long-local-folder-name")
    agents = _agents(root / "agents", "a", "b")
    spec = root / "study.toml"
    spec.write_text(
        f'name = "width"\nagent = {json.dumps(agents)}\ntask = "arith"\nmodel = "{model}"\n'
        "seed = [0, 1]\ntimeout = 30\n"
    )
    ran = cli("sweep", "run", str(spec), "--slots", "2", env={**env, "COLUMNS": "80"}, check=True)
    too_wide = [line for line in (ran.stdout + ran.stderr).splitlines() if len(line) > 80]
    assert not too_wide, too_wide  # its progress lines and its report too
    cli("sweep", "ingest", "width", env=env, check=True)
    return env


def _lines(out: str) -> list[str]:
    return out.splitlines()


COMMANDS = [
    ("results",),
    ("results", "--wide"),
    ("sweep", "report", "width"),
    ("sweep", "status", "width"),
    ("sweep", "run", "STUDY", "--dry-run"),
    ("doctor",),
    ("list", "benchmarks"),
    ("list", "tasks"),
    ("list", "agents"),
    ("list", "backends"),
]


@pytest.mark.parametrize("args", COMMANDS, ids=" ".join)
def test_each_command_fits_80_columns(study: dict[str, str], args: tuple[str, ...]) -> None:
    args = tuple(str(Path(study["AUTORL_HOME"]).parent / "study.toml") if a == "STUDY" else a for a in args)
    proc = cli(*args, env={**study, "COLUMNS": "80"})
    assert proc.returncode in (0, 1), proc.stderr  # doctor exits 0 either way; nothing is a usage error
    for stream in (proc.stdout, proc.stderr):
        too_wide = [line for line in _lines(stream) if len(line) > 80]
        assert not too_wide, "\n".join(too_wide)
    assert proc.stdout.strip()


def test_study_ids_are_shortened_to_a_prefix_audit_and_recover_accept(study: dict[str, str]) -> None:
    rows = json.loads(cli("results", "--json", env=study, check=True).stdout)
    ids = [r["run_id"] for r in rows]
    assert len(ids) == 4 and all(len(i) == 32 for i in ids)
    out = cli("results", env={**study, "COLUMNS": "80"}, check=True).stdout
    shown = [
        line.split()[0] for line in _lines(out) if line.split() and any(i.startswith(line.split()[0]) for i in ids)
    ]
    assert len(shown) == 4 and all(12 <= len(s) < 32 for s in shown), out
    assert "run ids shortened" in out
    # the cells around the ids stay readable: the improvement with its interval, the k and the outcome
    assert "beat baseline" in out and "[+" in out
    short = shown[0]
    full = next(i for i in ids if i.startswith(short))
    # the fake runs kept no hidden data to audit against: the one-line refusal names the run the prefix found
    audited = cli("audit", short, env=study)
    assert audited.returncode == 2 and audited.stderr.strip().splitlines() == [
        f"error: run {full} was recorded without its hidden data's folder (a record from another machine?): "
        "audit it where it ran"
    ], audited.stderr
    recovered = cli("recover", short, env=study, check=True)
    assert f"run {full}: already recorded" in recovered.stdout


def test_a_prefix_of_several_runs_is_refused_naming_them(tmp_path: Path) -> None:
    from autorl.errors import UsageError
    from autorl.record.display import short_ids
    from autorl.record.ledger import Ledger
    from autorl.record.row import RunRow

    ids = [
        "a1b2c3d4e5f6a7b8c9d0-e1f2a3b4-a1",
        "a1b2c3d4e5f6a7b8c9d0-e1f2a3b4-a2",
        "20261101T100000",
        "20261101T100000-1",
    ]
    ledger = Ledger(tmp_path / "autorl.db")
    for run_id in ids:
        ledger.ingest({"row": RunRow(run_id, "2026-11-01 10:00:00", "arith", "a", "m").record(), "submissions": []})
    try:
        assert ledger.find("20261101T100000") == "20261101T100000"  # an exact id wins over a longer one
        assert ledger.find("20261101T100000-") == "20261101T100000-1"
        assert ledger.find("nope") is None
        with pytest.raises(UsageError, match=r"is the start of 2 run ids .*: give more of it"):
            ledger.find("a1b2c3d4e5f6")
        # two attempts of one key differ only at their end: the screen shows them whole
        assert short_ids(ids) == {i: i for i in ids}
    finally:
        ledger.close()


def test_a_wider_screen_gets_wider_tables(study: dict[str, str]) -> None:
    narrow = cli("sweep", "report", "width", env={**study, "COLUMNS": "80"}, check=True).stdout
    wide = cli("sweep", "report", "width", env={**study, "COLUMNS": "200"}, check=True).stdout
    assert max(map(len, _lines(wide))) > 80 and len(_lines(wide)) < len(_lines(narrow))
    assert max(map(len, _lines(wide))) <= 200


def _every_command() -> list[list[str]]:
    from autorl.cli import app, command
    from autorl.plugins.loader import get_plugin_manager

    get_plugin_manager().hook.register_commands(cli=app)
    out, todo = [], [([], command(app))]
    while todo:
        path, cmd = todo.pop()
        out.append(path)
        todo += [([*path, name], sub) for name, sub in getattr(cmd, "commands", {}).items()]
    return sorted(out)


def test_every_help_fits_80_columns_and_a_flag_shows_no_type(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """`--no-audit <bool>`: a flag takes no value, and its help said it took a bool."""
    from autorl.cli import app, command

    monkeypatch.setenv("COLUMNS", "80")
    paths = _every_command()
    assert ["list", "tasks"] in paths and ["run"] in paths and len(paths) > 20
    shown = {}
    for path in paths:
        command(app).main(args=[*path, "--help"], prog_name="autorl", standalone_mode=False)
        shown[" ".join(path)] = capsys.readouterr().out
        assert "Usage: autorl" in shown[" ".join(path)], path
        assert "<bool>" not in shown[" ".join(path)], path
        too_wide = [line for line in shown[" ".join(path)].splitlines() if len(line) > 80]
        assert not too_wide, (path, too_wide)
    assert "--no-audit" in shown["run"] and "<float>" in shown["run"]  # an option with a value says its type
