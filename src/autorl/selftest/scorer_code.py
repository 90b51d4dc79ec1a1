"""The third-party scorer's side of ``autorl selftest``: a probe that runs as scorer code does, under the scorer
policy (:mod:`autorl.sandbox.scorer`), from a process holding the run's environment with its canaries.

The probe is a folder's code like a smith ``eval.py``: it tries to read the canaries of the scratch home, every
other process's ``/proc/<pid>/environ`` (its parent's holds the canaries), to list the folders its policy masks,
to write its own folder and to reach the host's listeners, and prints what it got. ``python -c`` of
:data:`HELPER` is that parent: it runs the probe through :class:`~autorl.sandbox.scorer.ScratchFolder`, whatever
``AUTORL_SCORER_SANDBOX`` says, and prints the probe's evidence, with whether the folder changed.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

PROBE = r"""
import json, os, socket, sys
cfg = json.loads(sys.argv[1])
got = {"read": {}, "environ": [], "listed": {}, "wrote": None, "connected": []}
for path in cfg["read"]:
    try:
        with open(path, "rb") as f:
            got["read"][path] = f.read(300).decode(errors="replace")
    except OSError:
        pass
for pid in os.listdir("/proc"):
    if pid.isdigit() and int(pid) != os.getpid():
        try:
            with open(f"/proc/{pid}/environ", "rb") as f:
                got["environ"].append(f.read(1 << 16).decode(errors="replace"))
        except OSError:
            pass
for folder in cfg["list"]:
    try:
        got["listed"][folder] = sorted(os.listdir(folder))[:100]
    except OSError:
        pass
try:
    with open(cfg["write"], "a") as f:
        f.write("written by scorer code\n")
    got["wrote"] = True
except OSError as exc:
    got["wrote"] = type(exc).__name__
for target in cfg["connect"]:
    try:
        if isinstance(target, str):
            s = socket.socket(socket.AF_UNIX)
            s.settimeout(3)
            s.connect(target)
        else:
            s = socket.create_connection(tuple(target), timeout=3)
        s.close()
        got["connected"].append(str(target))
    except OSError:
        pass
print(json.dumps(got))
"""

HELPER = r"""
import json, subprocess, sys
from pathlib import Path
from autorl.sandbox.scorer import FolderChanged, ScratchFolder
cfg = json.loads(sys.argv[1])
out = {"changed": None}
try:
    with ScratchFolder(Path(cfg["folder"]), masked=[Path(p) for p in cfg["masked"]]) as scratch:
        copy = scratch.fresh()
        run = scratch.launch([sys.executable, str(copy / "probe.py"), json.dumps(cfg)])
        proc = subprocess.run(run.argv, cwd=run.cwd, env=run.env, capture_output=True, text=True, timeout=120)
        lines = proc.stdout.strip().splitlines()
        out.update(json.loads(lines[-1]) if lines else {"error": (proc.stderr.strip().splitlines() or ["no output"])[-1]})
        out["policy"] = scratch.policy().record()
except FolderChanged as exc:
    out["changed"] = str(exc)
except Exception as exc:
    out["error"] = f"{type(exc).__name__}: {exc}"[:300]
print(json.dumps(out))
"""


def probe_scorer_code(
    root: Path, env: Mapping[str, str], *, read: Sequence[str], folders: Sequence[str], connect: Sequence[Any]
) -> dict[str, Any]:
    """Run the probe as scorer code (a folder under ``root`` holding it), from a process with ``env``; what it got,
    with ``changed`` (the folder changed) or ``error`` (it could not run)."""
    folder = root / "scorer-folder"
    folder.mkdir()
    (folder / "probe.py").write_text(PROBE)
    (folder / "description.md").write_text("a folder of scorer code\n")
    cfg = {
        "folder": str(folder),
        "masked": [str(folder.parent)],
        "read": list(read),
        "list": list(folders),
        "write": str(folder / "description.md"),
        "connect": list(connect),
    }
    try:
        proc = subprocess.run(
            [sys.executable, "-c", HELPER, json.dumps(cfg)], capture_output=True, text=True, timeout=300, env=dict(env)
        )
    except subprocess.TimeoutExpired:
        return {"error": "the scorer probe did not finish"}
    lines = proc.stdout.strip().splitlines()
    try:
        got = json.loads(lines[-1]) if lines else None
    except ValueError:
        got = None
    if not isinstance(got, dict):
        return {"error": (proc.stderr.strip().splitlines() or ["no output"])[-1][:300]}
    return got
