"""Downloads of benchmark data or of post-trained variants of the base model, found in the commands,
scripts, logs and histories the agent left."""

from __future__ import annotations

import os
import re
from pathlib import Path

from autorl.audit.budget import Budget
from autorl.audit.flags import HIGH, Flag
from autorl.audit.scan import HARNESS_FILES, Source, Text, agent_texts

_DOWNLOAD = re.compile(
    r"(snapshot_download|hf_hub_download|load_dataset|from_pretrained|huggingface-cli\s+download|hf\s+download|"
    r"git\s+clone|wget|curl)[^\n]{0,200}?([A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+)"
)
_DOWNLOAD_SUFFIXES = (".py", ".sh", ".log", ".txt", ".jsonl", ".json", ".ipynb", ".md", ".yaml", ".yml", ".cfg")
_DOWNLOAD_NAMES = (".bash_history", ".zsh_history", ".python_history", "agent.log", "trajectory.jsonl")


def _download_source(name: str) -> bool:
    base = os.path.basename(name)
    return base.endswith(_DOWNLOAD_SUFFIXES) or base in _DOWNLOAD_NAMES


class DownloadCheck:
    """Download commands for benchmark data or post-trained variants of the base model."""

    def __init__(self, benchmark_name: str, base_model: str) -> None:
        self.base = base_model.split("/")[-1].lower()
        self.family = re.sub(r"-?(instruct|chat|it|base)$", "", self.base)
        self.benchmark = benchmark_name.lower().replace("smith-", "")
        self.found: list[tuple[str, str]] = []

    def feed(self, text: Text) -> None:
        """Note the suspicious downloads in one text (only scripts, logs and histories are read)."""
        if not _download_source(text.name):
            return
        for lineno, line in enumerate(text.text.splitlines(), 1):
            for match in _DOWNLOAD.finditer(line):
                repo = match.group(2).lower()
                name = repo.split("/")[-1]
                is_variant = (
                    bool(self.family)
                    and self.family in name
                    and any(t in name for t in ("instruct", "chat", "-it", "rlhf", "dpo"))
                )
                if (is_variant and name != self.base) or self.benchmark in repo:
                    kind = "a post-trained variant of the base model" if is_variant else "the benchmark's data"
                    self.found.append((f"{text.where}:{lineno}", f"{match.group(2)[:200]} ({kind})"))

    def flags(self) -> list[Flag]:
        """One ``suspicious-download`` flag for everything fed, or none."""
        if not self.found:
            return []
        return [
            Flag(
                "suspicious-download",
                HIGH,
                f"{len(self.found)} download(s) of benchmark data or post-trained variants: "
                + "; ".join(sorted({d for _, d in self.found}))[:500],
                [e for e, _ in self.found][:1000],
            )
        ]


def check_downloads(workspace: Path, benchmark_name: str, base_model: str) -> list[Flag]:
    """Suspicious downloads in the agent's workspace (the harness's own files aside)."""
    check = DownloadCheck(benchmark_name, base_model)
    for text in agent_texts([Source(workspace, skip_top=HARNESS_FILES)], Budget(None)):
        check.feed(text)
    return check.flags()
