"""The host's places the policies name: the operator's homes, caches and runtime state to mask, the Python the
sandboxed processes run, the system's folders, and the folders the orchestrator names (``AUTORL_SANDBOX_RO``,
``AUTORL_SANDBOX_HIDE``, a model's repo)."""

from __future__ import annotations

import contextlib
import glob
import os
import pwd
import sys
import tempfile
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

#: Host places of sockets and runtime state, private and empty inside.
RUNTIME_DIRS = (Path("/run"), Path("/var/run"))
#: The system's folders a ``system`` view shows (those that exist; a link among them stays a link).
SYSTEM_DIRS = (
    Path("/usr"),
    Path("/bin"),
    Path("/sbin"),
    Path("/lib"),
    Path("/lib32"),
    Path("/lib64"),
    Path("/libx32"),
    Path("/etc"),
    Path("/opt"),
)
#: Files of the system that only root reads (a process that runs as root reads them otherwise: capabilities
#: dropped, the owner's permission remains).
SYSTEM_SECRETS = (
    "/etc/shadow",
    "/etc/shadow-",
    "/etc/gshadow",
    "/etc/gshadow-",
    "/etc/ssh/ssh_host_*key",
    "/etc/ssl/private",
    "/etc/sudoers",
    "/etc/sudoers.d",
    "/root",
)


def inside(path: Path, root: Path) -> bool:
    """``path`` is ``root`` or below it (both absolute and normalised, as the policies hold them)."""
    p, r = str(path), str(root)
    return p == r or p.startswith(r.rstrip("/") + "/")


def _env(environ: Mapping[str, str] | None) -> Mapping[str, str]:
    return os.environ if environ is None else environ


def operator_homes(environ: Mapping[str, str] | None = None) -> list[Path]:
    """The operator's home: ``HOME`` and the account's own (they differ under ``sudo -E`` or a container's
    ``HOME``), both as given and resolved."""
    env = _env(environ)
    found = [env.get("HOME", "")]
    with contextlib.suppress(KeyError):
        found.append(pwd.getpwuid(os.getuid()).pw_dir)
    out: list[Path] = []
    for raw in found:
        if raw and os.path.isabs(raw) and raw != "/":
            out += [Path(raw), Path(os.path.realpath(raw))]
    return list(dict.fromkeys(out))


#: variables that name where an operator's tools keep credentials and settings, wherever that is
KEY_PLACES = (
    "XDG_CONFIG_HOME",
    "XDG_DATA_HOME",
    "XDG_STATE_HOME",
    "XDG_CACHE_HOME",
    "XDG_RUNTIME_DIR",
    "CARGO_HOME",
    "DOCKER_CONFIG",
    "AWS_SHARED_CREDENTIALS_FILE",
    "AWS_CONFIG_FILE",
    "NETRC",
    "KUBECONFIG",
    "GNUPGHOME",
    "CLOUDSDK_CONFIG",
    "AZURE_CONFIG_DIR",
    "GOOGLE_APPLICATION_CREDENTIALS",
    "GH_CONFIG_DIR",
    "NPM_CONFIG_USERCONFIG",
    "PIP_CONFIG_FILE",
    "HF_TOKEN_PATH",
    "PASSWORD_STORE_DIR",
    "SSH_AUTH_SOCK",
)


def _system_folder(path: Path) -> bool:
    """``/``, one of the system's folders, or a folder that holds one: never masked whole."""
    return path == Path("/") or any(inside(s, path) for s in SYSTEM_DIRS)


def keys_elsewhere(environ: Mapping[str, str] | None = None) -> list[Path]:
    """What the operator keeps outside the home proper: the targets of the home's top-level links (``~/.docker``
    on a larger disk), and the places :data:`KEY_PLACES` name (``XDG_DATA_HOME``, ``DOCKER_CONFIG``...), each as
    given and resolved; a system folder (``/``, ``/etc``) is never one of them."""
    env = _env(environ)
    found: list[str] = []
    for name in KEY_PLACES:
        found += [p for p in env.get(name, "").split(os.pathsep) if p]
    for home in operator_homes(environ):
        with contextlib.suppress(OSError):
            found += [os.path.realpath(e.path) for e in os.scandir(home) if e.is_symlink()]
    homes = operator_homes(environ)
    out: list[Path] = []
    for raw in found:
        if not os.path.isabs(raw):
            continue
        for p in (Path(os.path.normpath(raw)), Path(os.path.realpath(raw))):
            if os.path.lexists(p) and not _system_folder(p) and not any(inside(p, h) for h in homes):
                out.append(p)
    return list(dict.fromkeys(out))


def model_bind_paths(model_path: Path) -> list[Path]:
    """The model as given and resolved; a Hugging Face cache snapshot brings its repo (blobs) along."""
    real = model_path.resolve()
    paths = [real]
    parts = real.parts
    if "snapshots" in parts:
        repo = Path(*parts[: parts.index("snapshots")])
        if repo.name.startswith(("models--", "datasets--")):
            paths.append(repo)
    return paths


def _listed(name: str, environ: Mapping[str, str] | None) -> list[Path]:
    return [Path(p).expanduser() for p in _env(environ).get(name, "").split(os.pathsep) if p]


def extra_read_only(environ: Mapping[str, str] | None = None) -> list[Path]:
    """Further host paths the operator lets the agent read (``AUTORL_SANDBOX_RO``, ``os.pathsep``-separated)."""
    return _listed("AUTORL_SANDBOX_RO", environ)


def extra_hidden(environ: Mapping[str, str] | None = None) -> list[Path]:
    """More folders to mask, named by the orchestrator's ``AUTORL_SANDBOX_HIDE`` (``os.pathsep``-separated): a
    study's worker names its shared autorl home and the study folder, whose models and data a run reaches
    through links (its read-only binds re-expose just those after the masking)."""
    return _listed("AUTORL_SANDBOX_HIDE", environ)


def hf_cache_dirs(environ: Mapping[str, str] | None = None) -> list[Path]:
    """The Hugging Face caches (hub, datasets) named by the environment or at their default place."""
    env = _env(environ)
    dirs = [
        Path(env[k])
        for k in ("HF_HOME", "HF_HUB_CACHE", "HUGGINGFACE_HUB_CACHE", "TRANSFORMERS_CACHE", "HF_DATASETS_CACHE")
        if env.get(k)
    ]
    cache = Path(env.get("XDG_CACHE_HOME") or Path(env.get("HOME") or Path.home()) / ".cache")
    dirs.append(cache / "huggingface")
    return dirs


def host_tmpdirs(environ: Mapping[str, str] | None = None) -> list[Path]:
    """The host's temporary directories other than /tmp (``TMPDIR``, where the grader's work files live)."""
    out = []
    for p in (_env(environ).get("TMPDIR"), tempfile.gettempdir()):
        if p and os.path.isabs(p):
            out.append(Path(os.path.realpath(p)))
    covered = (Path("/tmp"), Path("/var/tmp"))  # masked whatever they hold
    return [p for p in dict.fromkeys(out) if p != Path("/") and not any(inside(p, c) for c in covered)]


def runtime_dirs() -> list[Path]:
    """``/run`` and ``/var/run`` as directories to mask (a link to one masked already is covered by it)."""
    return list(dict.fromkeys(Path(os.path.realpath(p)) for p in RUNTIME_DIRS if p.is_dir()))


def system_secrets() -> list[Path]:
    """:data:`SYSTEM_SECRETS` present on this host, when this process runs as root (nobody else reads them)."""
    if os.getuid() != 0:
        return []
    return [Path(p) for pattern in SYSTEM_SECRETS for p in sorted(glob.glob(pattern))]


def mask_groups(environ: Mapping[str, str] | None = None) -> dict[str, list[Path]]:
    """What no untrusted process sees, whatever its kind, by what it is: the operator's homes (``homes``) and what
    the operator keeps outside them (``elsewhere``), the Hugging Face caches (``caches``), the host's temporary folders and runtime state (``host``), and the system's
    secrets (``secrets``)."""
    return {
        "homes": operator_homes(environ),
        "elsewhere": keys_elsewhere(environ),
        "caches": hf_cache_dirs(environ),
        "host": [Path("/tmp"), Path("/var/tmp"), *runtime_dirs(), *host_tmpdirs(environ)],
        "secrets": system_secrets(),
    }


def common_masks(environ: Mapping[str, str] | None = None) -> list[Path]:
    """Every folder of :func:`mask_groups`."""
    return [p for group in mask_groups(environ).values() for p in group]


def gpu_devices() -> list[str]:
    """The NVIDIA device nodes present (passed through when the agent has GPUs)."""
    return sorted(set(glob.glob("/dev/nvidia*")) | set(glob.glob("/dev/nvidia-caps/*")))


#: what a Python environment's prefix holds beside its code, which no sandboxed Python runs and operators keep keys
#: in: activation scripts (an ``export OPENAI_API_KEY=...`` appended), conda's settings and per-environment variables
ENV_SECRETS = (
    "bin/activate",
    "bin/activate.csh",
    "bin/activate.fish",
    "bin/activate.nu",
    "bin/activate.bat",
    "bin/Activate.ps1",
    "bin/activate_this.py",
    "conda-meta",
    "etc/conda",
)
#: the dot-entries a folder of code keeps keys in: a project's .env files, a remote URL with a token in .git/config,
#: the tools' own settings
DOT_SECRETS = (".git", ".netrc", ".npmrc", ".pypirc", ".aws", ".ssh", ".docker", ".config", ".gnupg", ".kube")


def dot_entries(folder: Path, names: Sequence[str] | None = None) -> list[Path]:
    """The dot-entries at the top of ``folder``; with ``names``, only ``.env`` files and those named."""
    try:
        found = sorted(e.name for e in os.scandir(folder) if e.name.startswith("."))
    except OSError:
        return []
    return [folder / n for n in found if names is None or n == ".env" or n.startswith(".env.") or n in names]


def python_secrets(paths: Iterable[Path]) -> list[Path]:
    """What the Python environment's folders (:func:`python_paths`) hold beside the code: each folder's dot-entries
    (no import reads one), and in an environment's prefix its activation scripts and conda settings."""
    prefixes = {os.path.realpath(p) for p in (sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix)}
    out: list[Path] = []
    for folder in paths:
        out += dot_entries(folder)
        if os.path.realpath(folder) in prefixes:
            out += [folder / rel for rel in ENV_SECRETS if os.path.lexists(folder / rel)]
    return list(dict.fromkeys(out))


def import_root() -> Path:
    """The folder autorl was imported from (a site folder, a checkout's ``src``)."""
    return Path(__file__).resolve().parents[2]


def python_paths(extra: Iterable[str] = ()) -> list[Path]:
    """What a sandboxed Python needs: the interpreter's prefixes, its folder, every import path but the
    orchestrator's own script folder (``sys.path[0]``: the caller's working folder, maybe its home), and the
    folder autorl itself was imported from (a checkout)."""
    roots = {
        sys.prefix,
        sys.base_prefix,
        sys.exec_prefix,
        sys.base_exec_prefix,
        str(Path(sys.executable).parent),
        str(import_root()),
        *extra,
    }
    roots |= {p for p in sys.path[1:] if p and os.path.isabs(p) and os.path.isdir(p)}
    return sorted(Path(p) for p in roots if os.path.isdir(p))
