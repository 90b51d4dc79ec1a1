"""What a researcher reads: one p-value rule on every screen, full precision in every file."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import pytest

from autorl.display import fmt_ci, fmt_p, fmt_signed
from autorl.ledger import Ledger
from autorl.results import RunRow

from .conftest import cli

TINY_P = 4.65e-06


@pytest.mark.parametrize(("p", "shown"), [
    (TINY_P, "4.7e-06"), (0.0321, "0.032"), (0.5, "0.5"), (1.0, "1"), (0.001, "0.001"), (0.00099, "9.9e-04"),
    (0.0, "<1e-300"), (5e-324, "<1e-300"), (None, "-"), (float("nan"), "-"), (-0.1, "-"), (True, "-"), ("0.1", "-"),
])
def test_one_p_value_rule(p: object, shown: str) -> None:
    assert fmt_p(p) == shown


def test_differences_and_intervals_keep_their_sign() -> None:
    assert fmt_signed(2.5) == "+2.5" and fmt_signed(-0.04, 2) == "-0.04" and fmt_signed(None) == "-"
    assert fmt_ci([-7.14, 7.14]) == "[-7.1, +7.1]" and fmt_ci([1.0]) == "-" and fmt_ci(["a", 1]) == "-"


def _record_tiny_p(home: Path) -> None:
    ledger = Ledger(home / "autorl.db")
    row = RunRow("20260101-000000-tiny", "2026-01-01 00:00:00", "arith", "a", "m", baseline=20.0,
                 best_score=22.123456789, improvement=2.123456789, improvement_ci95=[0.123456789, 4.5],
                 p_value=TINY_P, dev_k=1)
    ledger.ingest({"row": row.record(), "submissions": []})
    ledger.export_csv(home / "results.csv")
    ledger.close()


def test_files_keep_full_precision_and_screens_share_the_rule(home: Path) -> None:
    """p = 4.65e-06 was written as 0.0 in results.csv and `--format csv`: files keep every digit."""
    home.mkdir(parents=True)
    _record_tiny_p(home)
    with (home / "results.csv").open() as f:
        row = next(csv.DictReader(f))
    assert float(row["p_value"]) == TINY_P and float(row["improvement"]) == 2.123456789
    assert json.loads(row["improvement_ci95"]) == [0.123456789, 4.5]
    out = cli("results", "--format", "csv", check=True).stdout
    assert float(next(csv.DictReader(io.StringIO(out)))["p_value"]) == TINY_P
    assert json.loads(cli("results", "--json", check=True).stdout)[0]["p_value"] == TINY_P
    table = cli("results", check=True, env={"COLUMNS": "200"}).stdout
    assert "4.7e-06" in table and "<0.001" not in table
    md = cli("results", "--format", "markdown", check=True).stdout
    assert "4.7e-06" in md


def test_the_dashboard_shows_p_by_the_same_rule(tmp_path: Path) -> None:
    import httpx

    from autorl.ui import create_app

    from .scripted_llm import serve_in_thread

    _record_tiny_p(tmp_path)
    with serve_in_thread(create_app(tmp_path / "autorl.db")) as port, \
            httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=30, trust_env=False) as client:
        page = client.get("/runs/20260101-000000-tiny").text
    assert "<dt>p value</dt><dd>4.7e-06</dd>" in page and "0.00</dd>" not in page.split("p value")[1][:40]
