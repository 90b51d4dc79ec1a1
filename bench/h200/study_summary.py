"""The summary of bench/h200/study.sh: per phase (study, first) each run's wall time, end and score, and each
submission's latency (accepted to scored) with its grader worker; the study's report; the hf backend's GSM8K-shaped
figure. Writes OUT/summary.json and OUT/summary.md.

    python bench/h200/study_summary.py OUT
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any


def _read(path: Path) -> Any:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


def runs(sweep: Path) -> list[dict[str, Any]]:
    out = []
    for attempt in sorted(sweep.glob("keys/*/a*")):
        outcome = _read(attempt / "outcome.json") or {}
        result = _read(attempt / "result.json") or {}
        row = result.get("row") or {}
        subs = []
        for s in result.get("submissions") or []:
            start, end = s.get("created_at"), s.get("finished_at")
            latency = round(end - start, 2) if isinstance(start, int | float) and isinstance(end, int | float) else None
            subs.append({"id": s.get("submission_id"), "latency_s": latency, "score": s.get("score"),
                         "engine": s.get("engine"), "load_s": s.get("load_s"), "generate_s": s.get("generate_s"),
                         "worker": (s.get("extra") or {}).get("worker")})
        baseline = result.get("baseline") if isinstance(result.get("baseline"), dict) else {}
        first = (subs[0]["worker"] or {}) if subs and isinstance(subs[0]["worker"], dict) else {}
        out.append({"attempt": attempt.name, "run_id": row.get("run_id"), "seed": row.get("seed"),
                    # the dev baseline read from the cache (no engine loaded for it), and what the slot's warm-up did
                    "baseline_cached": bool((baseline.get("extra") or {}).get("cached")),
                    "baseline_s": round(baseline["duration_s"], 1) if isinstance(baseline.get("duration_s"), int | float)
                    else None, "warm_up": first.get("warm_up"),
                    "outcome": outcome.get("kind"), "reason": outcome.get("reason"),
                    "attempt_wall_s": outcome.get("duration_s"), "run_wall_s": row.get("duration_s"),
                    "test_score": row.get("test_score"), "improvement": row.get("improvement"),
                    "submissions": subs})
    return out


PHASES = ("study", "study3", "study2", "first")


def _gpu_peaks(out: Path, phase: str) -> dict[str, Any]:
    """The GPU's memory in use at its peak (nvidia-smi every 5 s) and each process's peak, from gpu_call.sh's logs."""
    peak_total = 0
    for line in ((out / f"smi-{phase}.log").read_text().splitlines() if (out / f"smi-{phase}.log").is_file() else []):
        parts = [p.strip() for p in line.split(",")]
        if len(parts) >= 2 and parts[1].split(" ")[0].isdigit():
            peak_total = max(peak_total, int(parts[1].split(" ")[0]))
    apps: dict[str, int] = {}
    log = out / f"smi-apps-{phase}.log"
    for line in (log.read_text().splitlines() if log.is_file() else []):
        parts = [p.strip() for p in line.split(",")]
        if len(parts) == 3 and parts[2].split(" ")[0].isdigit():
            key = f"{parts[0]} {parts[1].rsplit('/', 1)[-1]}"
            apps[key] = max(apps.get(key, 0), int(parts[2].split(" ")[0]))
    return {"peak_total_mib": peak_total or None, "peak_by_process_mib": apps}


def main(out: Path) -> dict[str, Any]:
    summary: dict[str, Any] = {}
    for phase in PHASES:
        sweep = out / "sweeps" / phase
        if sweep.is_dir():
            summary[phase] = {"wall": _read(out / f"{phase}-wall.json"), "runs": runs(sweep),
                              "report": _read(out / f"{phase}-report.json"), "gpu": _gpu_peaks(out, phase),
                              "disk": _read(out / f"disk-{phase}.json")}
    summary["gsm_hf"] = _read(out / "gsm-hf.json")
    (out / "summary.json").write_text(json.dumps(summary, indent=1))
    lines = ["# Study on one GPU (bench/h200/study.sh)", ""]
    for phase in PHASES:
        if phase not in summary:
            continue
        wall = (summary[phase]["wall"] or {}).get("wall_s")
        lines += [f"## {phase} (whole phase {wall} s)", "",
                  "| run | seed | outcome | run wall s | test | improvement | baseline | warm-up | submission latencies s "
                  "| engines |",
                  "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
        for r in summary[phase]["runs"]:
            lat = ", ".join(str(s["latency_s"]) for s in r["submissions"]) or "-"
            engines = ", ".join(f"{s['engine']} ({s['load_s']} s)" for s in r["submissions"]) or "-"
            base = "cached" if r["baseline_cached"] else f"scored ({r['baseline_s']} s)"
            warm = r["warm_up"] or {}
            warmed = (f"{warm['engine']} in {warm.get('load_s')} s" if "engine" in warm
                      else warm.get("skipped") or warm.get("error") or "-")
            lines.append(f"| {r['run_id']} | {r['seed']} | {r['outcome']} | {r['run_wall_s']} | {r['test_score']} "
                         f"| {r['improvement']} | {base} | {warmed} | {lat} | {engines} |")
        for c in (summary[phase]["report"] or {}).get("cells", []):
            lines.append(f"\nmean improvement {c.get('mean')} (95% CI {c.get('ci95')}) over {c.get('runs')} runs")
        for m in (summary[phase]["report"] or {}).get("missing", []):
            lines.append(f"\nno result: seed {m.get('seed')} ({m.get('status')}): {'; '.join(m.get('reasons') or [])}")
        gpu = summary[phase]["gpu"]
        lines.append(f"\nGPU memory at its peak: {gpu['peak_total_mib']} MiB in all; by process: "
                     + ", ".join(f"{k} {v} MiB" for k, v in sorted(gpu["peak_by_process_mib"].items())))
        lines.append(f"\ndisk after the phase: {json.dumps(summary[phase]['disk'])}")
        lines.append("")
    lines += ["## hf backend, 1,319-item 8-shot GSM8K-shaped set", "", "```", json.dumps(summary["gsm_hf"])[:2000],
              "```", ""]
    (out / "summary.md").write_text("\n".join(lines))
    return summary


if __name__ == "__main__":
    main(Path(sys.argv[1]))
