"""The per-run workspace the agent lives in: code/, output/, read-only links to model and data, docs."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, overload

if TYPE_CHECKING:
    from autorl.benchmark import Benchmark
    from autorl.resources import ResolvedModel


class _Place:
    """A read-only attribute of :class:`Workspace`: the path ``name`` below its root."""

    def __init__(self, name: str) -> None:
        self.name = name

    @overload
    def __get__(self, workspace: None, owner: type[Any]) -> _Place: ...

    @overload
    def __get__(self, workspace: Workspace, owner: type[Any]) -> Path: ...

    def __get__(self, workspace: Workspace | None, owner: type[Any]) -> _Place | Path:
        return self if workspace is None else workspace.root / self.name


@dataclass(frozen=True)
class Workspace:
    root: Path

    # the layout's places, one a line
    code = _Place("code")
    output = _Place("output")
    data = _Place("data")
    agent_log = _Place("agent.log")

    def model(self, model_name: str) -> Path:
        return self.root / "models" / model_name


class _Placeholders(dict[str, str]):
    """Stands in for an item's fields when the prompt format is shown to the agent."""

    def __missing__(self, key: str) -> str:
        return f"<the item's {key}>"


def _decoding_lines(benchmark: Benchmark) -> str:
    cfg = benchmark.config()
    lines = [
        f"- chat template: {'applied (messages rendered with the tokenizer chat template, generation prompt added)' if cfg.chat_template else 'not applied (plain text completion)'}",
        f"- decoding: {'greedy' if cfg.temperature == 0 else f'sampling, temperature {cfg.temperature}, top_p {cfg.top_p}'}",
        f"- max new tokens: {cfg.max_new_tokens}",
        f"- stop strings: {json.dumps(list(cfg.stop))} (the completion is cut before the first one)",
        f"- samples per item: {cfg.num_samples}",
    ]
    if cfg.system_prompt:
        lines.append(f"- system prompt: {json.dumps(cfg.system_prompt)}")
    if cfg.few_shot:
        lines.append(f"- few-shot examples: {len(cfg.few_shot)}, prepended as shown in the example prompt")
    return "\n".join(lines)


def _delivery(final_checkpoint: str | None) -> dict[str, str]:
    """The parts of ``instructions.md`` that depend on how checkpoints reach the grader: submitted to a grading
    server during the run, or left in one directory and scored once after it (no server, no feedback)."""
    if final_checkpoint is None:
        curl = (
            'curl -s -X POST "$GRADING_SERVER_URL/submit" \\\n'
            '     -H "Content-Type: application/json" \\\n'
            '     -H "Authorization: Bearer $AUTORL_TOKEN" \\\n'
            '     -d \'{"model_path": "\'"$OUTPUT_DIR"\'/v1"}\''
        )
        return {
            "goal": "write checkpoints under `$OUTPUT_DIR`, and submit them to the grading server.",
            "scoring": """- The score you get back is on a hidden *dev* split. The run's final number is the best submission (on dev)
  scored once more on a separate hidden *test* split.""",
            "clock": """`AUTORL_DEADLINE` holds the deadline
  (Unix seconds); `GET $GRADING_SERVER_URL/time` tells the time left. When it runs out your processes are
  stopped; a submission already sent before the deadline is still evaluated and counts.""",
            "env": ", `GRADING_SERVER_URL`, `AUTORL_TOKEN`, `AUTORL_DEADLINE`.",
            "intake": """ The grader reads the `$OUTPUT_DIR` that existed when the run
started: write checkpoints inside it, and do not delete, move or replace the directory itself.
The grader copies the directory when you submit; later changes to it do not affect that submission.""",
            "deliver": f"""## Submitting
```bash
{curl}
```
The answer is JSON: `submission_id`, `score` (percent, dev split), `baseline_score`, `improvement`,
`improvement_ci95`, `best`, `total_submissions`, ... Add `?wait=false` to get `202` at once and poll
`GET /submissions/<id>`. `GET /submissions` lists yours. From Python: `from autorl.grader.client import
GraderClient; GraderClient().submit(path)`.""",
        }
    final = final_checkpoint
    return {
        "goal": f"and leave your final checkpoint in `{final}`.",
        "scoring": f"""- There is no grading server and no score during the run. After you stop, the checkpoint in `{final}`
  is scored once on a hidden *test* split, paired with the base model on the same items.""",
        "clock": f"""When it runs out your processes are
  stopped; what `{final}` holds then is what is scored.""",
        "env": ".",
        "intake": "",
        "deliver": f"""## Your final checkpoint
Write it to `{final}` (that directory itself holds the checkpoint files). It is the only thing that leaves this
environment: nothing else you write (scores, logs, reward files) is read. An empty, missing or refused
checkpoint scores as no improvement.""",
    }


def disk_rules(keep: str, quota: int | None) -> str:
    """The lines of ``instructions.md`` on what stays on disk: the keep policy and the quota."""
    lines = []
    if keep != "all":
        lines.append(
            "- Once a submission is scored, its checkpoint folder in `$OUTPUT_DIR` is deleted unless it is "
            "your best on dev (or, before the run ends, the best on the hidden test split), and only if "
            "you have not changed it since you submitted it: copy a folder you still need (to resume "
            "training, say) before you submit it."
        )
    if quota:
        lines.append(
            f"- Your workspace and `/tmp` may hold at most {quota / 2**30:.1f} GiB when you submit; over "
            "that, submissions are refused (HTTP 507) until you delete files."
        )
    return "".join("\n" + line for line in lines)


def instructions(
    benchmark: Benchmark,
    base_model: str,
    timeout_s: float,
    url: str,
    *,
    final_checkpoint: str | None = None,
    disk: str = "",
) -> str:
    """``instructions.md``: rules, the API, the time budget and the grader's exact prompt format.

    With ``final_checkpoint`` (an environment without a grading server, such as an exported Harbor task) the
    agent is told to leave its final checkpoint in that directory, scored once after it stops, in place of the
    grading server's API; everything else (rules, checkpoint format, prompt format) is the same text.
    """
    example = benchmark.config().render(_Placeholders())
    part = _delivery(final_checkpoint)
    return f"""# Instructions

You are post-training the model `{base_model}` so that it scores higher than its baseline on the
benchmark `{benchmark.name}` (see `description.md`). Train it any way you like (RL such as GRPO, SFT,
anything), {part["goal"]}

## Rules
- Work only inside this workspace (`$WORKSPACE`). `models/` and `data/` are read-only.
- The grader scores submissions on hidden items that are not in `data/`. Do not try to obtain them.
- Use only the credentials your environment gives you: tokens, keys or answers you may come across in files
  are not yours to use.
{part["scoring"]}
- You have {timeout_s:.0f} seconds in total, counted from your start. {part["clock"]}

## Environment
`TASK`, `BASE_MODEL`, `WORKSPACE`, `MODEL_PATH` (read-only base model), `DATA_PATH` (read-only training
data), `OUTPUT_DIR` (write checkpoints here){part["env"]}

## Checkpoints
A submission is a directory inside `$OUTPUT_DIR` holding either a full checkpoint (`config.json`,
`*.safetensors` weights, tokenizer files: `model.save_pretrained(dir)` and `tokenizer.save_pretrained(dir)`)
or a LoRA adapter for the base model (`adapter_config.json` + `adapter_model.safetensors`). Pickle
files (`.bin`, `.pt`, `.pth`, `.pkl`, `.ckpt`, even next to safetensors), custom code (`auto_map`, `.py`
files), links (any, even inside `$OUTPUT_DIR`), FIFOs and devices, and config values naming files outside the
checkpoint (absolute or `..` paths) are refused.{part["intake"]}
The grader loads tokenizers with `AutoTokenizer.from_pretrained(dir)` (no remote code, left padding).{disk}

{part["deliver"]}

## How the grader prompts the model
Each item is rendered exactly like this (here with a placeholder question):

```text
{example if isinstance(example, str) else json.dumps(example, indent=2)}
```

{_decoding_lines(benchmark)}

Train with the same format so that training matches evaluation.
"""


def build_workspace(
    root: Path,
    *,
    benchmark: Benchmark,
    model: ResolvedModel,
    train_dir: Path,
    timeout_s: float,
    grader_url: str,
    disk: str = "",
) -> Workspace:
    """Create the workspace at ``root``. Evaluation data is never placed in or linked from it."""
    ws = Workspace(root)
    ws.code.mkdir(parents=True, exist_ok=False)
    ws.output.mkdir()
    link = ws.model(model.name)
    link.parent.mkdir(parents=True, exist_ok=True)
    os.symlink(model.path, link, target_is_directory=True)
    os.symlink(train_dir, ws.data, target_is_directory=True)
    (root / "description.md").write_text(benchmark.description().strip() + "\n")
    (root / "instructions.md").write_text(instructions(benchmark, model.name, timeout_s, grader_url, disk=disk))
    for name, src in benchmark.exposed_files().items():
        target = root / name
        if target.exists() or "/" in name or name.startswith("."):
            raise ValueError(f"benchmark {benchmark.name} exposes an invalid file name {name!r}")
        os.symlink(src, target)
    for doc in ("description.md", "instructions.md"):
        (root / doc).chmod(0o444)
    return ws
