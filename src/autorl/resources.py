"""Models and data: where they live (``AUTORL_HOME``) and how they are acquired."""

from __future__ import annotations

import contextlib
import fcntl
import os
import re
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from autorl.errors import ResourceError, UsageError

if TYPE_CHECKING:
    from autorl.benchmark import Benchmark

BUILTIN_MODELS = ("autorl:tiny",)
_HUB_ID = re.compile(r"^[A-Za-z0-9][\w.-]*/[\w.-]+(@[\w./-]+)?$")


def autorl_home() -> Path:
    """``AUTORL_HOME`` (``AUTORL_FILE_PATH`` is accepted as an alias), default ``~/.cache/autorl``."""
    raw = os.environ.get("AUTORL_HOME") or os.environ.get("AUTORL_FILE_PATH")
    return Path(raw).expanduser() if raw else Path.home() / ".cache" / "autorl"


def usable_home() -> Path:
    """:func:`autorl_home`, created; one that cannot be is refused with the reason and what to do."""
    home = autorl_home()
    try:
        home.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise UsageError(
            f"AUTORL_HOME {home} cannot be created ({exc.strerror or exc}); set AUTORL_HOME to a folder you can write"
        ) from None
    if not os.access(home, os.W_OK | os.X_OK):
        raise UsageError(f"AUTORL_HOME {home} is not writable; set AUTORL_HOME to a folder you can write")
    return home


def private_dir(path: Path) -> Path:
    """A directory only its owner can enter (grader storage, hidden data)."""
    path.mkdir(parents=True, exist_ok=True, mode=0o700)
    os.chmod(path, 0o700)
    return path


@contextmanager
def file_lock(path: Path) -> Iterator[None]:
    """Hold an exclusive lock on the file ``path`` (created with its folder) while the block runs: processes
    that prepare the same data take turns."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


@dataclass(frozen=True)
class ResolvedModel:
    """A model as given by the user and where its files are."""

    spec: str
    path: Path
    source: str  # "local", "hub" or "builtin"
    revision: str | None = None

    @property
    def name(self) -> str:
        """The name used in the workspace (``models/<name>``) and as BASE_MODEL."""
        if self.source == "local":
            return self.path.name
        return self.spec.split("@", 1)[0]


def _builtin_model(spec: str, home: Path) -> ResolvedModel:
    from autorl.builtin import tiny_model

    target = home / "models" / "autorl" / f"tiny-v{tiny_model.RECIPE_VERSION}"
    with file_lock(target.with_name(target.name + ".lock")):
        if not (target / "config.json").is_file():
            print(f"building the built-in model {spec} into {target} (once; about half a minute)", file=sys.stderr)
            tiny_model.build(target, log=lambda m: print(m, file=sys.stderr))
            for p in target.rglob("*"):
                if p.is_file():
                    p.chmod(0o444)
    return ResolvedModel(spec, target, "builtin", f"recipe-v{tiny_model.RECIPE_VERSION}")


def _hub_model(spec: str, home: Path) -> ResolvedModel:
    repo_id, _, revision = spec.partition("@")
    work_offline_unless_reachable(lambda line: print(line, file=sys.stderr))
    try:
        from huggingface_hub import snapshot_download
        from huggingface_hub.errors import HfHubHTTPError, LocalEntryNotFoundError, RepositoryNotFoundError
    except ImportError as exc:  # pragma: no cover - a core dependency
        raise ResourceError("huggingface_hub is not installed") from exc
    try:
        path = Path(
            snapshot_download(
                repo_id,
                revision=revision or None,
                cache_dir=str(home / "models" / "hub"),
                allow_patterns=["*.json", "*.safetensors", "*.txt", "*.model", "*.tiktoken", "*.jinja"],
            )
        )
    except LocalEntryNotFoundError:
        raise ResourceError(
            f"model {repo_id!r} is not in the cache and cannot be downloaded (offline: HF_HUB_OFFLINE is set or "
            "the hub is unreachable); download it on a connected machine or pass a local directory"
        ) from None
    except RepositoryNotFoundError:
        raise ResourceError(f"no model {repo_id!r} on the hub (or it is gated: log in with `hf auth login`)") from None
    except (HfHubHTTPError, OSError, ValueError) as exc:
        raise ResourceError(f"could not download {repo_id!r}: {str(exc).splitlines()[0]}") from None
    return ResolvedModel(spec, path, "hub", path.name)


def resolve_model(spec: str, home: Path | None = None) -> ResolvedModel:
    """A local directory, a built-in recipe (``autorl:tiny``), or a hub id (``org/name[@revision]``)."""
    home = home or autorl_home()
    if spec in BUILTIN_MODELS:
        return _builtin_model(spec, home)
    local = Path(spec).expanduser()
    if local.is_dir():
        if not (local / "config.json").is_file() and not (local / "adapter_config.json").is_file():
            raise ResourceError(f"{local} has no config.json: not a model directory")
        return ResolvedModel(spec, local.resolve(), "local", None)
    if spec.startswith("autorl:"):
        raise ResourceError(f"unknown built-in model {spec!r}; built-in: {', '.join(BUILTIN_MODELS)}")
    if _HUB_ID.match(spec) and not spec.startswith((".", "/", "~")):
        return _hub_model(spec, home)
    raise ResourceError(f"model {spec!r} is neither a local directory, a hub id (org/name) nor a built-in model")


@dataclass(frozen=True)
class HubAccess:
    """Whether the Hugging Face hub can be reached from here, and how that was found out."""

    online: bool
    detail: str
    #: set by the operator (``HF_HUB_OFFLINE``), not found by asking the hub
    declared: bool = False


#: how long the one request that asks whether the hub is there may take
HUB_TIMEOUT_S = 3.0
_HUB: list[HubAccess] = []  # the answer, once per process


def _offline_declared() -> bool:
    return any(
        os.environ.get(v, "").strip().lower() in ("1", "true", "yes", "on")
        for v in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE")
    )


def hub_access(timeout: float = HUB_TIMEOUT_S) -> HubAccess:
    """Whether the hub can be reached: offline when ``HF_HUB_OFFLINE`` (or ``TRANSFORMERS_OFFLINE``) says so, else
    one HEAD request to its endpoint (``HF_ENDPOINT``, through the proxies the environment names) with a short
    timeout, asked once per process. ``autorl doctor`` and ``autorl run`` both ask here, so they agree."""
    if _offline_declared():
        return HubAccess(False, "offline: HF_HUB_OFFLINE is set", declared=True)
    if _HUB:
        return _HUB[0]
    import httpx

    endpoint = (os.environ.get("HF_ENDPOINT") or "https://huggingface.co").rstrip("/")
    try:
        httpx.head(endpoint + "/api/models", timeout=timeout, follow_redirects=False)
    except httpx.HTTPError as exc:
        reason = str(exc).splitlines()[0][:160] if str(exc) else type(exc).__name__
        _HUB.append(HubAccess(False, f"{endpoint} cannot be reached ({reason})"))
    else:  # any answer at all: the hub is there (a gated or missing repository is another matter)
        _HUB.append(HubAccess(True, f"{endpoint} reachable"))
    return _HUB[0]


def work_offline_unless_reachable(say: Callable[[str], None] | None = None) -> HubAccess:
    """Before anything may be downloaded: when the hub cannot be reached, this process works offline from then on
    (huggingface_hub's offline mode: a model or dataset not in the cache fails at once, with the hint of the code
    that asked for it, instead of after five retries over about 24 s); said through ``say`` when given."""
    access = hub_access()
    if not access.online and not access.declared:
        import huggingface_hub.constants as hub_constants

        if not hub_constants.HF_HUB_OFFLINE and say is not None:
            say(
                f"the Hugging Face hub cannot be reached ({access.detail}): using the local cache only (set "
                "HF_HUB_OFFLINE=1 to skip this check)"
            )
        hub_constants.HF_HUB_OFFLINE = True
    return access


@dataclass(frozen=True)
class BenchmarkData:
    train_dir: Path
    hidden_dir: Path


def prepare_data(benchmark: Benchmark, home: Path | None = None) -> BenchmarkData:
    """Run the plugin's idempotent data preparation: hidden data for the grader (drawn with the installation's
    secret, kept in ``hidden_dir``), then training data for the agent."""
    home = home or autorl_home()
    train_dir = home / "datasets" / benchmark.name
    hidden_dir = private_dir(home / "hidden" / benchmark.name)
    benchmark.hidden_dir = hidden_dir
    work_offline_unless_reachable()  # a plugin's download then fails at once with its hint where the hub is gone
    with file_lock(home / "datasets" / f".{benchmark.name}.lock"):
        try:
            benchmark.prepare_eval_data(hidden_dir)
            benchmark.prepare_train_data(train_dir)
        except OSError as exc:
            raise ResourceError(f"could not prepare the data of {benchmark.name}: {exc}") from None
    for p in train_dir.rglob("*"):
        if p.is_file() and not p.is_symlink():
            with contextlib.suppress(OSError):  # a read-only copy (the agent's view of it) is read-only already
                p.chmod(0o444)
    return BenchmarkData(train_dir, hidden_dir)


#: Post-trained (instruct / chat) variants of base models that agents are known to fetch in place of
#: training: the audit's weight check compares submissions with the ones found in the local cache.
INSTRUCT_VARIANTS: dict[str, tuple[str, ...]] = {
    "Qwen/Qwen2.5-0.5B": ("Qwen/Qwen2.5-0.5B-Instruct",),
    "Qwen/Qwen2.5-1.5B": ("Qwen/Qwen2.5-1.5B-Instruct", "Qwen/Qwen2.5-Math-1.5B-Instruct"),
    "Qwen/Qwen2.5-3B": ("Qwen/Qwen2.5-3B-Instruct",),
    "Qwen/Qwen2.5-7B": ("Qwen/Qwen2.5-7B-Instruct", "Qwen/Qwen2.5-Math-7B-Instruct"),
    "Qwen/Qwen2.5-Math-1.5B": ("Qwen/Qwen2.5-Math-1.5B-Instruct",),
    "Qwen/Qwen2.5-Math-7B": ("Qwen/Qwen2.5-Math-7B-Instruct",),
    "Qwen/Qwen2.5-Coder-1.5B": ("Qwen/Qwen2.5-Coder-1.5B-Instruct",),
    "Qwen/Qwen2.5-Coder-7B": ("Qwen/Qwen2.5-Coder-7B-Instruct",),
    "Qwen/Qwen3-0.6B-Base": ("Qwen/Qwen3-0.6B",),
    "Qwen/Qwen3-1.7B-Base": ("Qwen/Qwen3-1.7B",),
    "Qwen/Qwen3-4B-Base": ("Qwen/Qwen3-4B",),
    "Qwen/Qwen3-8B-Base": ("Qwen/Qwen3-8B",),
    "meta-llama/Llama-3.2-1B": ("meta-llama/Llama-3.2-1B-Instruct",),
    "meta-llama/Llama-3.2-3B": ("meta-llama/Llama-3.2-3B-Instruct",),
    "meta-llama/Llama-3.1-8B": ("meta-llama/Llama-3.1-8B-Instruct",),
    "google/gemma-2-2b": ("google/gemma-2-2b-it",),
    "google/gemma-3-1b-pt": ("google/gemma-3-1b-it",),
    "HuggingFaceTB/SmolLM2-135M": ("HuggingFaceTB/SmolLM2-135M-Instruct",),
    "HuggingFaceTB/SmolLM2-360M": ("HuggingFaceTB/SmolLM2-360M-Instruct",),
    "HuggingFaceTB/SmolLM2-1.7B": ("HuggingFaceTB/SmolLM2-1.7B-Instruct",),
}


def cached_instruct_variants(spec: str, home: Path | None = None) -> list[Path]:
    """Snapshot directories of the base model's known post-trained variants that are already in a local cache
    (autorl's and Hugging Face's); nothing is downloaded."""
    home = home or autorl_home()
    repo_id = spec.partition("@")[0]
    caches = [home / "models" / "hub"]
    env_hub = os.environ.get("HF_HUB_CACHE") or os.environ.get("HUGGINGFACE_HUB_CACHE")
    if env_hub:
        caches.append(Path(env_hub))
    hf_home = os.environ.get("HF_HOME")
    caches.append(Path(hf_home) / "hub" if hf_home else Path.home() / ".cache" / "huggingface" / "hub")
    found: list[Path] = []
    for variant in INSTRUCT_VARIANTS.get(repo_id, ()):
        folder = "models--" + variant.replace("/", "--")
        for cache in dict.fromkeys(caches):
            snapshots = cache / folder / "snapshots"
            if not snapshots.is_dir():
                continue
            for snap in sorted(snapshots.iterdir()):
                if (snap / "config.json").is_file() and any(snap.glob("*.safetensors")):
                    found.append(snap)
    return found
