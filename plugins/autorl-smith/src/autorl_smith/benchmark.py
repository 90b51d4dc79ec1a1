"""A rl-smith folder as an autorl benchmark, with held-out dev/test data the agent never sees."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any, ClassVar

from autorl import (
    Backend,
    Benchmark,
    EvalConfig,
    Evaluator,
    GenerationEvaluator,
    Item,
    ItemResult,
    Progress,
    ResourceError,
    UsageError,
    autorl_home,
    file_lock,
    has_hidden_items,
    read_jsonl,
    secret_rng,
    write_hidden_items,
    write_jsonl_atomic,
)
from autorl.sandbox import FolderChanged, copy_code, file_digests, launch, scorer_mode, scorer_policy
from autorl_smith.folder import AGENT_FILES, AGENT_FOLDER_ENV, SmithFolder, eval_file, folder_digest
from autorl_smith.scorer import Request, score_all

DOWNLOAD_TIMEOUT_S = 3600


def version_of(folder: SmithFolder) -> str:
    """The benchmark's version: the scheme (2: held-out splits drawn with the installation's secret) and a hash
    of the folder's files, so that any change to either is a new version."""
    return f"2.{folder.version()}"


def prepare_copy(folder: SmithFolder, work: Path, timeout_s: float = DOWNLOAD_TIMEOUT_S) -> None:
    """Copy a folder to ``work`` and run its ``download_data.py`` there, as grading does before any split.

    The copy holds the bytes the folder was discovered with (its version) or is refused; ``download_data.py``
    runs under the scorer policy with a network (it downloads), writing only to the copy, and may not change a
    file the copy came with."""
    source = folder.path
    shutil.rmtree(work, ignore_errors=True)
    try:
        copy_code(source, work)
    except FolderChanged as exc:
        raise UsageError(str(exc)) from None
    try:  # data/ too holds folders and regular files only: a link would bring an operator's file into the copy
        if (source / "data").is_symlink():
            raise FolderChanged(f"{source}: data/ is a link; a benchmark folder holds its data itself")
        if (source / "data").is_dir():
            copy_code(source / "data", work / "data", skip=())
    except FolderChanged as exc:
        shutil.rmtree(work, ignore_errors=True)
        raise UsageError(str(exc)) from None
    if folder_digest(work) != folder.digest:
        shutil.rmtree(work, ignore_errors=True)
        raise UsageError(f"{source} changed since it was discovered; run again to use it as it is now")
    script = work / "download_data.py"
    if script.is_file():
        came_with = file_digests(work, ("data",))
        mode, executable = scorer_mode()
        run = launch(
            scorer_policy(work, network="on", masked=folder_places(folder)),
            [sys.executable, str(script)],
            mode=mode,
            executable=executable,
        )
        try:
            proc = subprocess.run(run.argv, cwd=run.cwd, env=run.env, capture_output=True, text=True, timeout=timeout_s)
        except subprocess.TimeoutExpired:
            raise ResourceError(f"{source}/download_data.py did not finish within {timeout_s:.0f} s") from None
        if proc.returncode != 0:
            tail = (proc.stderr or proc.stdout).strip().splitlines()[-1:] or ["no output"]
            raise ResourceError(f"{source}/download_data.py failed: {tail[0][:300]}")
        now = file_digests(work, ("data",))
        changed = sorted(rel for rel, digest in came_with.items() if now.get(rel) != digest)
        if changed:
            raise UsageError(
                f"{source}/download_data.py changed the folder's own {changed[0]} in the grader's copy: refused"
            )
    if not (work / "data" / "train.jsonl").is_file():
        raise ResourceError(f"{source}: data/train.jsonl is missing after download_data.py")


def folder_places(folder: SmithFolder) -> list[Path]:
    """The folder of benchmarks the folder was found in and the folder itself: what scorer code never sees."""
    return [folder.path.absolute().parent.resolve(), folder.path.resolve()]


def eval_config_of(config: dict[str, Any]) -> EvalConfig:
    template = str(config.get("prompt_template", "{question}"))
    shots = tuple(
        (template.format(question=s["question"]), " " + str(s["answer"])) for s in config.get("few_shot", []) or []
    )
    return EvalConfig(
        prompt_template=template,
        few_shot=shots,
        chat_template=bool(config.get("chat_template", False)),
        system_prompt=config.get("system_prompt"),
        max_new_tokens=int(config.get("max_new_tokens", 256)),
        temperature=float(config.get("temperature", 0.0)),
        stop=tuple(config.get("stop", ()) or ()),
    )


class SmithEvaluator(GenerationEvaluator):
    """Generation with the folder's prompt settings, then the folder's evaluate() in a separate process."""

    def evaluate(
        self, benchmark: Benchmark, items: Sequence[Item], backend: Backend, progress: Progress | None = None
    ) -> list[ItemResult]:
        assert isinstance(benchmark, SmithBenchmark)
        generated = super().evaluate(benchmark, items, backend, None)
        requests = [
            Request(str(i.input["question"]), r.completions[0] if r.completions else "", str(i.reference))
            for i, r in zip(items, generated, strict=True)
        ]
        scored = score_all(
            benchmark.work_dir(),
            requests,
            benchmark.timeout_s(),
            benchmark.folder.eval_digest,
            masked=folder_places(benchmark.folder),
        )
        if progress:
            progress(len(items))
        return [
            ItemResult(r.id, s.score, r.completions, s.error, r.extra) for r, s in zip(generated, scored, strict=True)
        ]


class SmithBenchmark(Benchmark):
    """Base of the classes made for each discovered folder (see plugin.py)."""

    folder: ClassVar[SmithFolder]
    source: ClassVar[Path]
    #: ``--benchmark-option`` names and what each takes: ``chat_template`` (always taken) and the checkpoint
    #: folder for the opencompass evaluator where the backend names none
    declared_options: ClassVar[dict[str, Any]] = {"model_dir": str}

    def config(self) -> EvalConfig:
        cfg = eval_config_of(self.folder.config)
        if "chat_template" in self.options:
            cfg = cfg.replace(chat_template=bool(self.options["chat_template"]))
        return cfg

    def timeout_s(self) -> float:
        return float(self.folder.config.get("eval_timeout_s", 30))

    def description(self) -> str:
        grader = not self.folder.agent_view and self.work_dir().is_dir()
        own = (self.work_dir() if grader else self.folder.path) / "description.md"
        text = own.read_text() if own.is_file() else f"# {self.name}\n\nA benchmark from {self.folder.path}.\n"
        return text.rstrip() + (
            '\n\n## Data\n`data/train.jsonl`: one JSON object a line, `{"question": ..., "answer": ...}`. '
            "The grader's dev and test items are held out and not in it; which items they are is drawn with this "
            "installation's secret.\n"
        )

    def work_dir(self) -> Path:
        """A grader-owned copy of the folder at this version, where download_data.py has run."""
        return autorl_home() / "hidden" / "smith" / f"{self.folder.name}-{self.folder.version()}"

    def _prepare_folder(self) -> Path:
        if self.folder.agent_view:
            raise UsageError(
                f"{self.name}: the agent's view of {self.folder.path} holds no data; the grader prepares it"
            )
        work = self.work_dir()
        with file_lock(work.with_name(work.name + ".lock")):
            if (work / ".ready").is_file():
                return work
            prepare_copy(self.folder, work)
            (work / ".ready").write_text("")
        return work

    def _hidden_dir(self) -> Path:
        return Path(self.hidden_dir) if self.hidden_dir else autorl_home() / "hidden" / self.name

    def _splits(self, hidden_dir: Path) -> tuple[list[dict[str, Any]], list[dict[str, Any]], list[dict[str, Any]], str]:
        """train (for the agent), dev and test, drawn with the installation's secret: halves of the folder's
        eval file, or a tenth and a fifth carved out of its train.jsonl (then train is the rest)."""
        work = self._prepare_folder()
        train = read_jsonl(work / "data" / "train.jsonl")
        held = eval_file(work, self.folder.config)
        rng = secret_rng(hidden_dir, f"{self.name}/v{self.version}/splits")
        if held is not None and held.is_file():
            rows = read_jsonl(held)
            rng.shuffle(rows)
            half = max(1, len(rows) // 2)
            return train, rows[:half], rows[half:] or rows[:half], "eval_file"
        order = list(range(len(train)))
        rng.shuffle(order)
        n_dev, n_test = max(1, len(train) // 10), max(1, len(train) // 5)
        dev = [train[i] for i in order[:n_dev]]
        test = [train[i] for i in order[n_dev : n_dev + n_test]]
        rest = [train[i] for i in sorted(order[n_dev + n_test :])]
        return rest, dev, test, "carved"

    def prepare_train_data(self, target_dir: Path) -> None:
        """What the secret's draw leaves for the agent (``prepare_data`` sets ``hidden_dir``)."""
        train, _, _, _ = self._splits(self._hidden_dir())
        rows = [{"question": r["question"], "answer": r["answer"]} for r in train]
        write_jsonl_atomic(target_dir / "train.jsonl", rows, if_changed=True)

    def prepare_eval_data(self, hidden_dir: Path) -> None:
        if all(has_hidden_items(hidden_dir, s) for s in self.splits) and (hidden_dir / "split.json").is_file():
            return
        train, dev, test, how = self._splits(hidden_dir)
        for split, rows in (("dev", dev), ("test", test)):
            write_hidden_items(
                hidden_dir,
                split,
                [Item(f"{split}-{k}", {"question": r["question"]}, str(r["answer"])) for k, r in enumerate(rows)],
            )
        (hidden_dir / "split.json").write_text(
            json.dumps(
                {
                    "source": how,
                    "folder": str(self.folder.path),
                    "version": self.folder.version(),
                    "train": len(train),
                    "dev": len(dev),
                    "test": len(test),
                },
                indent=2,
            )
        )

    def _scoring_dir(self) -> Path:
        """Where ``eval.py`` runs: the grader's own copy, made before the agent starts and out of its reach; in the
        agent's process (its reward, say) the folder as it sees it, read-only under the sandbox."""
        return self.folder.path if self.folder.agent_view else self._prepare_folder()

    def score(self, item: Item, completion: str) -> float:
        """``evaluate`` of the folder's ``eval.py`` under the scorer policy; in the agent's own process (whose
        sandbox bounds it) without a sandbox of its own."""
        result = score_all(
            self._scoring_dir(),
            [Request(str(item.input.get("question", "")), completion, str(item.reference))],
            self.timeout_s(),
            self.folder.eval_digest,
            mode="none" if self.folder.agent_view else None,
            masked=folder_places(self.folder),
        )[0]
        return result.score

    def evaluator(self) -> Evaluator:
        if self.folder.eval_mode == "opencompass":
            from autorl_smith.opencompass import OpenCompassEvaluator

            return OpenCompassEvaluator()
        return SmithEvaluator()

    def exposed_files(self) -> dict[str, Path]:
        """The config's ``expose_files``, from the folder itself (the agent is shown them there too, see
        :meth:`agent_paths`); refused in one line when one is data (under ``data/``, or the eval file)."""
        return {Path(rel).name: self._agent_file(rel) for rel in self.folder.expose_files}

    def _agent_file(self, rel: str) -> Path:
        root = self.folder.path.resolve()
        path = root / rel
        held = eval_file(root, self.folder.config)
        is_data = (root / "data") in path.parents or (held is not None and path.resolve() == held.resolve())
        if is_data or path.resolve() != path:
            raise UsageError(
                f"{self.name}: config.yaml exposes {rel!r}, which is data the agent must not get (under "
                f"data/, the eval file, or a link); remove it from expose_files in {root}/config.yaml"
            )
        return path

    def agent_paths(self) -> list[Path]:
        """What the agent's process may read of the folder to load the benchmark (``config.yaml``, ``eval.py``,
        ``description.md``) and its exposed files: regular files, no link, nothing of its data."""
        root = self.folder.path.resolve()
        own = [root / rel for rel in AGENT_FILES if (root / rel).resolve() == root / rel and (root / rel).is_file()]
        return [*own, *self.exposed_files().values()]

    def agent_env(self) -> dict[str, str]:
        """``SMITH_AGENT_FOLDER``: discovery in the agent's process loads this folder alone, from what it sees."""
        return {AGENT_FOLDER_ENV: str(self.folder.path.resolve())}

    def hidden_paths(self) -> list[Path]:
        """The whole folder of benchmarks where this one was found (other benchmarks' data included), this
        folder wherever a link leads (:meth:`agent_paths` are shown over both), its data and eval file, and
        the grader's copy."""
        root = self.folder.path.resolve()
        held = eval_file(root, self.folder.config)
        return [
            self.folder.path.absolute().parent.resolve(),
            root,
            root / "data",
            *([held] if held else []),
            self.work_dir(),
        ]
