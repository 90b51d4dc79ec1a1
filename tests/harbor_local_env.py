"""A Harbor environment for a machine without a container runtime, for the Harbor tests only.

Harbor's own trial runs unchanged (agent phase, artifact collection, the separate verifier environment, reward
parsing); only the container is replaced. An environment is a private folder on the host, and each command runs in
bubblewrap with that folder's ``app``, ``logs``, ``tests``, ``solution``, ``runtime`` and ``tmp`` bound at
``/app``, ``/logs``, ... over a read-only view of the host, in its own pid namespace (and network namespace under
``no-network``); with ``--ek auto_mounting=true`` Harbor's log folders are bound from the trial's folders on the
host, as a container runtime mounts them, so that what the agent writes to ``/logs/verifier`` lands where Harbor
reads rewards. The image is "built" from the Dockerfile's ``COPY``, ``ENV`` and ``WORKDIR`` lines; its ``RUN``
lines (package installs, the agent's user, file modes) are not replayed: the Python named by
``AUTORL_HARBOR_LOCAL_PATH`` (a folder put first on ``PATH``) stands in for the image's packages, and commands run
as the caller whatever user Harbor asks for.

Imported by the ``harbor`` process (Python 3.12) through ``--env tests.harbor_local_env:LocalEnvironment``: it
needs only harbor and the standard library.
"""

from __future__ import annotations

import asyncio
import os
import shlex
import shutil
import tempfile
from pathlib import Path, PurePosixPath
from typing import Any

from harbor.environments.base import BaseEnvironment, ExecResult
from harbor.environments.capabilities import EnvironmentCapabilities
from harbor.models.task.config import NetworkMode
from harbor.models.trial.paths import EnvironmentPaths

OWN = ("app", "logs", "tests", "solution", "runtime", "installed-agent", "tmp")
_HOST_SKIP = {"proc", "dev", "sys", *OWN}


def _lines(dockerfile: Path) -> list[tuple[str, str]]:
    """(instruction, arguments) of each Dockerfile line, continuations joined, comments dropped."""
    out, pending = [], ""
    for raw in dockerfile.read_text().splitlines():
        if not pending and (not raw.strip() or raw.lstrip().startswith("#")):
            continue
        if raw.rstrip().endswith("\\"):
            pending += raw.rstrip()[:-1] + " "
            continue
        line, pending = pending + raw, ""
        instruction, _, args = line.strip().partition(" ")
        out.append((instruction.upper(), args.strip()))
    return out


class LocalEnvironment(BaseEnvironment):
    """One environment of a trial: a folder and a bubblewrap sandbox per command."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self._root: Path | None = None
        self._image_env: dict[str, str] = {}
        self._workdir = "/"
        super().__init__(*args, **kwargs)

    @staticmethod
    def type() -> str:
        return "autorl-local"

    @property
    def capabilities(self) -> EnvironmentCapabilities:
        return EnvironmentCapabilities(disable_internet=True, mounted=True)

    def _binds(self) -> list[tuple[Path, PurePosixPath]]:
        """Host folder -> sandbox path, the environment's own folders first, then Harbor's mounts over them."""
        assert self._root is not None
        own = [(self._root / name, PurePosixPath("/", name)) for name in OWN]
        mounts = [(Path(m["source"]), PurePosixPath(m["target"])) for m in self._host_mounts if m["type"] == "bind"]
        return own + sorted(mounts, key=lambda b: len(b[1].parts))

    def _validate_definition(self) -> None:
        if not (self.environment_dir / "Dockerfile").is_file():
            raise FileNotFoundError(f"{self.environment_dir} has no Dockerfile")

    def _host(self, path: str) -> Path:
        """Where the sandbox path ``path`` is on the host: under the deepest bind that holds it."""
        target = PurePosixPath(path)
        if not target.is_absolute() or ".." in target.parts:
            raise ValueError(f"{path} is not an absolute path")
        for source, inside in reversed(self._binds()):
            if target == inside or inside in target.parents:
                return source.joinpath(*target.relative_to(inside).parts)
        raise ValueError(f"{path} is outside the folders this environment holds ({', '.join(OWN)})")

    def _build(self) -> None:
        for instruction, args in _lines(self.environment_dir / "Dockerfile"):
            if instruction == "COPY":
                words = [w for w in shlex.split(args) if not w.startswith("--")]
                target = words[-1]
                for source in words[:-1]:
                    src = self.environment_dir / source
                    if src.is_dir():  # a folder's contents go into the target folder
                        shutil.copytree(src, self._host(target), dirs_exist_ok=True, symlinks=True)
                        continue
                    dst = self._host(f"{target.rstrip('/')}/{src.name}" if target.endswith("/") else target)
                    dst.parent.mkdir(parents=True, exist_ok=True)
                    shutil.copy2(src, dst)
            elif instruction == "ENV":
                for pair in shlex.split(args):
                    name, _, value = pair.partition("=")
                    self._image_env[name] = value
            elif instruction == "WORKDIR":
                self._workdir = args

    async def start(self, force_build: bool) -> None:
        self._root = Path(tempfile.mkdtemp(prefix="harbor-local-"))
        for name in OWN:
            (self._root / name).mkdir(mode=0o777)
        self._build()
        if self.task_env_config.workdir:
            self._workdir = self.task_env_config.workdir
        # what a container runtime's mounts would have created (Harbor's docker and e2b providers do the same)
        paths = EnvironmentPaths.for_os(self.os)
        await self.ensure_dirs(
            [*self._mount_targets(writable_only=True), paths.agent_dir, paths.verifier_dir, paths.artifacts_dir]
        )

    async def stop(self, delete: bool) -> None:
        if delete and self._root is not None:
            shutil.rmtree(self._root, ignore_errors=True)

    async def upload_file(self, source_path: Path | str, target_path: str) -> None:
        target = self._host(target_path)
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(source_path, target)

    async def upload_dir(self, source_dir: Path | str, target_dir: str) -> None:
        shutil.copytree(source_dir, self._host(target_dir), dirs_exist_ok=True, symlinks=True)

    async def download_file(self, source_path: str, target_path: Path | str) -> None:
        Path(target_path).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(self._host(source_path), target_path)

    async def download_dir(self, source_dir: str, target_dir: Path | str) -> None:
        shutil.copytree(self._host(source_dir), target_dir, dirs_exist_ok=True, symlinks=True)

    def _argv(self, command: str, cwd: str | None) -> list[str]:
        assert self._root is not None
        argv = [
            os.environ.get("AUTORL_BWRAP", "bwrap"),
            "--die-with-parent",
            "--unshare-pid",
            "--unshare-ipc",
            "--unshare-uts",
            "--proc",
            "/proc",
            "--dev",
            "/dev",
            "--ro-bind",
            "/sys",
            "/sys",
        ]
        if self._network_policy.network_mode == NetworkMode.NO_NETWORK:
            argv.append("--unshare-net")
        for entry in sorted(os.listdir("/")):
            if entry not in _HOST_SKIP:
                argv += ["--ro-bind-try", f"/{entry}", f"/{entry}"]
        for source, inside in self._binds():
            source.mkdir(parents=True, exist_ok=True)
            argv += ["--bind", str(source), str(inside)]
        return [*argv, "--chdir", cwd or self._workdir, "bash", "-c", command]

    async def exec(
        self,
        command: str,
        cwd: str | None = None,
        env: dict[str, str] | None = None,
        timeout_sec: int | None = None,
        user: str | int | None = None,
    ) -> ExecResult:
        path = ":".join(p for p in (os.environ.get("AUTORL_HARBOR_LOCAL_PATH"), "/usr/local/bin:/usr/bin:/bin") if p)
        full = {"PATH": path, "HOME": "/tmp", "LANG": "C.UTF-8", **self._image_env, **(self._merge_env(env) or {})}
        proc = await asyncio.create_subprocess_exec(
            *self._argv(command, cwd),
            env=full,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            start_new_session=True,
        )
        try:
            out, err = await asyncio.wait_for(proc.communicate(), timeout=timeout_sec)
        except TimeoutError:
            proc.kill()
            out, err = await proc.communicate()
            return ExecResult(stdout=out.decode(errors="replace"), stderr=err.decode(errors="replace"), return_code=124)
        return ExecResult(
            stdout=out.decode(errors="replace"),
            stderr=err.decode(errors="replace"),
            return_code=proc.returncode if proc.returncode is not None else -1,
        )
