"""``autorl doctor``: what is installed and ready, and what to do about each missing piece."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
import warnings
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any


@dataclass(frozen=True)
class Check:
    name: str
    ok: bool
    detail: str
    fix: str = ""
    #: the fix is a shell command to copy (a screen wraps it where the shell takes a continuation), not words
    command: bool = False

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _sandbox() -> Check:
    """The sandbox ``autorl run`` would use (its own choice, :func:`autorl.sandbox.choose`, so ``AUTORL_BWRAP``
    and every other setting it honours count here too)."""
    from autorl.sandbox import choose

    choice = choose("auto", "on")
    if choice.mode == "bwrap":
        detail = f"autorl run uses {choice.executable} (recorded as {choice.recorded_mode})"
        return Check("sandbox (bubblewrap)", True, detail + (f"; {choice.warning}" if choice.warning else ""))
    return Check(
        "sandbox (bubblewrap)",
        False,
        f"autorl run would use none: {choice.warning}",
        "apt-get install bubblewrap (or your distribution's package), or set AUTORL_BWRAP to a working bwrap",
    )


def _scorer_sandbox() -> Check:
    """How third-party scorer code (a smith folder's ``eval.py``) would run here (:mod:`autorl.sandbox.scorer`)."""
    from autorl.errors import AutorlError
    from autorl.sandbox.scorer import SCORER_SANDBOX_ENV, scorer_mode

    name = "scorer sandbox (third-party code)"
    try:
        mode, exe = scorer_mode()
    except AutorlError as exc:
        return Check(name, False, str(exc), "apt-get install bubblewrap, or set AUTORL_BWRAP to a working bwrap")
    if mode == "none":
        return Check(
            name,
            False,
            f"{SCORER_SANDBOX_ENV}=none: scorer code runs with your rights",
            f"unset {SCORER_SANDBOX_ENV} where bubblewrap runs",
        )
    return Check(name, True, f"scorer code runs under {exe}: no network, no home, its own pid namespace")


def _hub() -> Check:
    """What ``autorl run`` will find of the Hugging Face hub (the same one request, :func:`autorl.resources.hub_access`):
    unreachable is a failed line, since every hub model and hub dataset then has to be local."""
    from autorl.resources import hub_access

    access = hub_access()
    if access.online:
        return Check("Hugging Face hub", True, access.detail)
    if access.declared:
        return Check("Hugging Face hub", True, f"{access.detail}: hub models and data must be in the cache or local")
    return Check(
        "Hugging Face hub",
        False,
        f"{access.detail}; runs work offline: hub models and data must be in "
        "the cache or local (connect to the hub, or say so and skip this check:)",
        "export HF_HUB_OFFLINE=1",
        command=True,
    )


def _python_of(env_var: str, minimum: tuple[int, int], module: str, setup: str, name: str) -> Check:
    python = os.environ.get(env_var)
    if not python:
        return Check(name, False, f"{env_var} is not set", setup, command=True)
    probe = f"import sys, {module}; print('%d.%d' % sys.version_info[:2])"
    try:
        out = subprocess.run([python, "-c", probe], capture_output=True, text=True, timeout=120)
    except OSError as exc:
        return Check(name, False, f"{python}: {exc.strerror}", setup, command=True)
    if out.returncode != 0:
        return Check(name, False, f"{python} cannot import {module}", setup, command=True)
    version = tuple(int(x) for x in out.stdout.strip().split("."))
    if version < minimum:
        return Check(
            name, False, f"{python} is Python {out.stdout.strip()}", f"{name} needs Python >= {minimum[0]}.{minimum[1]}"
        )
    return Check(name, True, f"{python} (Python {out.stdout.strip()})")


def checks() -> list[Check]:
    from autorl import __version__
    from autorl.errors import AutorlError, PluginConflictError, PluginTypeError, extra_install
    from autorl.inference.gpu_share import visible_gpus
    from autorl.plugins.registry import KINDS, plugin_summary, registrations
    from autorl.resources import autorl_home

    out = [Check("autorl", True, f"{__version__} on Python {sys.version.split()[0]} ({sys.executable})")]
    registry_error: AutorlError | None = None
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            plugins = plugin_summary()
            for kind in KINDS:
                registrations(kind)
        except (PluginConflictError, PluginTypeError) as exc:  # the registry cannot load: say so, check the rest
            registry_error = exc
    if registry_error is not None:
        out.append(
            Check("plugins", False, str(registry_error), "uninstall or disable that plugin (AUTORL_DISABLE_PLUGINS)")
        )
    else:
        external = [p for p in plugins if not p["builtin"]]
        out.append(
            Check(
                "plugins",
                True,
                ", ".join(f"{p['name']} ({p['distribution']} {p['version']})" for p in external)
                or "only the built-ins",
            )
        )
    for w in caught:
        out.append(Check("plugin warning", False, str(w.message), "fix or uninstall that plugin"))
    home = autorl_home()
    try:
        home.mkdir(parents=True, exist_ok=True)
        writable = os.access(home, os.W_OK)
    except OSError:
        writable = False
    out.append(
        Check("AUTORL_HOME", writable, str(home), "" if writable else "set AUTORL_HOME to a writable local directory")
    )
    if writable:
        out.append(runs_in_flight(home))
    if writable and not home_is_local(home):
        out.append(
            Check(
                "AUTORL_HOME disk",
                False,
                f"{home} is on a network file system",
                "SQLite (WAL) needs a local disk: set AUTORL_HOME to a local directory",
            )
        )
    for reg in ({} if registry_error else registrations("backend")).values():
        ok = reg.cls.available()
        fix = {
            "hf": f"pip install {extra_install('hf')}",
            "vllm": "pip install vllm (needs a CUDA GPU)",
            "openai": "",
        }.get(reg.name, f"see the {reg.distribution} documentation")
        out.append(Check(f"backend {reg.name}", ok, "available" if ok else "not usable here", "" if ok else fix))
    gpus = visible_gpus()
    out.append(
        Check(
            "GPUs",
            bool(gpus),
            ", ".join(f"{i} ({u})" for i, u in gpus) or "none visible (CPU only)",
            "" if gpus else "install the NVIDIA driver for GPU runs; CPU runs work without",
        )
    )
    has_trl = importlib.util.find_spec("trl") is not None
    out.append(
        Check(
            "example agent (trl)",
            has_trl,
            "trl installed" if has_trl else "trl missing",
            "" if has_trl else f"pip install {extra_install('train')}",
            command=True,
        )
    )
    out.append(_sandbox())
    out.append(_scorer_sandbox())
    out.append(_hub())
    out.append(
        _python_of(
            "AUTORL_OPENCOMPASS_PYTHON",
            (3, 10),
            "opencompass",
            "python3 -m venv ~/.venvs/opencompass && ~/.venvs/opencompass/bin/pip install opencompass==0.5.4 "
            "'pyarrow<22' 'transformers<5'; export AUTORL_OPENCOMPASS_PYTHON=~/.venvs/opencompass/bin/python",
            "OpenCompass environment",
        )
    )
    out.append(
        _python_of(
            "AUTORL_OPENHANDS_PYTHON",
            (3, 12),
            "openhands.sdk",
            "python3.12 -m venv ~/.venvs/openhands && ~/.venvs/openhands/bin/pip install openhands-sdk; "
            "export AUTORL_OPENHANDS_PYTHON=~/.venvs/openhands/bin/python",
            "OpenHands environment",
        )
    )
    if registry_error is None:
        out += plugin_checks()
    return out


def plugin_checks() -> list[Check]:
    """The lines plugins add through ``doctor_checks``; a hook that raises is a failed line naming its plugin."""
    from autorl.plugins.loader import get_plugin_manager

    out: list[Check] = []

    def report(name: str, ok: bool, detail: str, fix: str = "") -> None:
        out.append(Check(str(name), bool(ok), str(detail), str(fix)))

    for impl in get_plugin_manager().hook.doctor_checks.get_hookimpls():
        try:
            impl.function(report=report)
        except Exception as exc:
            out.append(
                Check(
                    f"plugin {impl.plugin_name}",
                    False,
                    f"its doctor check failed: {type(exc).__name__}: "
                    f"{str(exc).splitlines()[0][:200] if str(exc) else ''}",
                    "fix or uninstall that plugin",
                )
            )
    return out


def runs_in_flight(home: Path) -> Check:
    """The runs the ledger lists as in flight: live ones, and lost ones (their orchestrator died) to recover."""
    from autorl.errors import AutorlError
    from autorl.record.ledger import Ledger
    from autorl.runs.liveness import lost_runs

    if not (home / "autorl.db").is_file():
        return Check("runs in flight", True, "none")
    try:
        ledger = Ledger(home / "autorl.db")
    except AutorlError as exc:
        return Check("runs in flight", False, str(exc), "see the error")
    try:
        live = ledger.live()
        lost = lost_runs(ledger)
    finally:
        ledger.close()
    if not lost:
        return Check("runs in flight", True, f"{len(live)} live" if live else "none")
    names = ", ".join(f"{r['run_id']} ({r['task']}, {r['agent']}: {r['detail']})" for r in lost)
    fix = f"autorl recover {lost[0]['run_id']}" if len(lost) == 1 else "autorl recover --all"
    return Check("lost runs", False, f"{len(lost)} lost: {names}; {len(live) - len(lost)} live", fix, command=True)


def home_is_local(home: Path) -> bool:
    """SQLite's WAL needs a local disk; NFS homes are common on clusters."""
    try:
        with open("/proc/mounts") as f:
            mounts = [line.split() for line in f]
    except OSError:
        return True
    best = max((m for m in mounts if str(home.resolve()).startswith(m[1])), key=lambda m: len(m[1]), default=None)
    return best is None or best[2] not in ("nfs", "nfs4", "cifs", "smbfs", "fuse.sshfs", "lustre")
