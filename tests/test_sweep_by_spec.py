"""Every `autorl sweep` command that names a study takes its spec file too, as `sweep run` does."""

from __future__ import annotations

import json
from pathlib import Path

from .conftest import cli
from .test_sweep import _agents, fake_run, model  # noqa: F401 (fixtures)


def test_status_report_and_ingest_take_the_spec_file(
    home: Path,
    tmp_path: Path,
    fake_run: Path,  # noqa: F811
    model: Path,  # noqa: F811
) -> None:
    spec = tmp_path / "study.toml"
    agents = _agents(tmp_path / "agents", "a", "b")
    spec.write_text(
        f'name = "by-spec"\nagent = {json.dumps(agents)}\ntask = "arith"\nmodel = "{model}"\nseed = [0]\ntimeout = 30\n'
    )
    env = {"AUTORL_HOME": str(home)}
    cli("sweep", "run", str(spec), "--slots", "2", env=env, check=True)
    by_name = json.loads(cli("sweep", "report", "by-spec", "--format", "json", env=env, check=True).stdout)
    by_spec = json.loads(cli("sweep", "report", str(spec), "--format", "json", env=env, check=True).stdout)
    assert by_spec == by_name and len(by_spec["cells"]) == 2
    status = json.loads(cli("sweep", "status", str(spec), "--json", env=env, check=True).stdout)
    assert [r["state"] for r in status] == ["done", "done"]
    assert cli("sweep", "ingest", str(spec), env=env, check=True).stdout.strip() == "ingested 2 runs"
    missing = cli("sweep", "report", str(tmp_path / "agents"), env=env)  # a folder that is no study
    assert missing.returncode == 2 and missing.stderr.startswith("error: no sweep at")
