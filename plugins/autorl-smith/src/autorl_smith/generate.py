"""``autorl smith generate``: a driver model writes an rl-smith folder for a data source; code writes the data.

The driver sees the columns and a few sample rows (a handful from the evaluation split), and answers with one
JSON object: the folder's ``config.yaml``, ``eval.py`` and ``description.md``, and ``columns`` (``question``,
a ``{column}`` template, and ``answer``, a column). Code turns every row into ``data/train.jsonl`` and
``data/test.jsonl`` (the hidden split), forces the config's name and eval file, then validates; the
validator's lines go back to the driver, up to ``rounds`` times. A folder is moved into place only once it
validates; otherwise the draft stays next to it (a hidden folder that discovery skips).
"""

from __future__ import annotations

import json
import random
import re
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml

from autorl_smith.validate import validate

FILES = ("config.yaml", "eval.py", "description.md")
MAX_FILE_CHARS = 64 * 1024
SAMPLE_TRAIN, SAMPLE_EVAL, MAX_CELL = 5, 3, 400

Chat = Callable[[list[dict[str, str]]], str]

INSTRUCTIONS = """You write an rl-smith benchmark folder named {name!r} for the data below. Answer with ONE JSON
object and nothing else:
{{"columns": {{"question": "<a Python format template over the columns, e.g. {{problem}}>",
              "answer": "<the column holding the reference answer>"}},
 "files": {{"config.yaml": "...", "eval.py": "...", "description.md": "..."}}}}
config.yaml needs name, eval_mode: per_sample, expose_files: [] and may set prompt_template (holding {{question}}),
max_new_tokens, stop, few_shot. eval.py defines evaluate(question, model_answer, reference_answer, **kwargs)
returning a float in [0, 1]: 1.0 for a correct answer (the reference itself must score 1.0), less for wrong
or empty ones. description.md tells the engineer what the task is. The data files are written for you from
the columns.

Columns: {columns}
Sample training rows:
{train}
Sample evaluation rows (the rest are hidden):
{evals}
"""


class ReplyError(ValueError):
    """The driver's reply is not the JSON object asked for; the message is sent back to it."""


def _sample(rows: list[dict[str, Any]], n: int) -> str:
    picked = random.Random(0).sample(rows, min(n, len(rows)))
    return "\n".join(json.dumps({k: str(v)[:MAX_CELL] for k, v in r.items()}, ensure_ascii=False) for r in picked)


def first_prompt(name: str, train: list[dict[str, Any]], evals: list[dict[str, Any]]) -> str:
    columns = sorted({k for r in (train + evals)[:1000] for k in r})
    return INSTRUCTIONS.format(
        name=name,
        columns=", ".join(map(str, columns)),
        train=_sample(train, SAMPLE_TRAIN),
        evals=_sample(evals, SAMPLE_EVAL) or "(none: the hidden split is carved from the training rows)",
    )


def parse_reply(text: str) -> tuple[dict[str, str], dict[str, str]]:
    """(files, columns) from the driver's reply; a ``ReplyError`` says what is wrong with it."""
    match = re.search(r"\{.*\}", text, re.DOTALL)
    try:
        data = json.loads(match.group(0)) if match else None
    except ValueError:
        data = None
    if not isinstance(data, dict):
        raise ReplyError("your reply holds no JSON object; answer with the one JSON object asked for")
    files, columns = data.get("files"), data.get("columns")
    if not isinstance(files, dict) or not all(isinstance(files.get(f), str) for f in FILES):
        raise ReplyError(f'"files" must map each of {", ".join(FILES)} to its text')
    if set(files) - set(FILES):
        raise ReplyError(f'"files" may hold only {", ".join(FILES)}, not {", ".join(sorted(set(files) - set(FILES)))}')
    if any(len(files[f]) > MAX_FILE_CHARS for f in FILES):
        raise ReplyError(f"each file must be under {MAX_FILE_CHARS} characters")
    if not isinstance(columns, dict) or not all(isinstance(columns.get(k), str) for k in ("question", "answer")):
        raise ReplyError('"columns" must give a "question" template and an "answer" column')
    return {f: files[f] for f in FILES}, {k: columns[k] for k in ("question", "answer")}


def to_items(rows: list[dict[str, Any]], columns: dict[str, str]) -> list[dict[str, str]]:
    """Rows as ``{"question", "answer"}`` by the driver's mapping, applied by code to every row."""
    out = []
    for n, row in enumerate(rows, 1):
        if columns["answer"] not in row:
            raise ReplyError(f"the answer column {columns['answer']!r} is not a column (row {n})")
        try:
            question = columns["question"].format_map({str(k): v for k, v in row.items()})
        except (KeyError, ValueError, IndexError, AttributeError) as exc:
            raise ReplyError(f"the question template {columns['question']!r} does not fit row {n}: {exc!r}") from None
        out.append({"question": question, "answer": str(row[columns["answer"]])})
    return out


def write_draft(
    draft: Path,
    name: str,
    files: dict[str, str],
    columns: dict[str, str],
    train: list[dict[str, Any]],
    evals: list[dict[str, Any]],
) -> None:
    shutil.rmtree(draft, ignore_errors=True)
    (draft / "data").mkdir(parents=True)
    for rel in FILES:
        (draft / rel).write_text(files[rel])
    try:
        config = yaml.safe_load(files["config.yaml"])
    except yaml.YAMLError:
        config = None
    if isinstance(config, dict):  # the name and the data files are the operator's, not the driver's
        config["name"] = name
        config.pop("eval_file", None)
        (draft / "config.yaml").write_text(yaml.safe_dump(config, sort_keys=False))
    for rel, rows in (("data/train.jsonl", train), ("data/test.jsonl", evals)):
        if rows:
            (draft / rel).write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in to_items(rows, columns)))


def generate(
    train: list[dict[str, Any]],
    evals: list[dict[str, Any]],
    name: str,
    out: Path,
    chat: Chat,
    rounds: int = 3,
    say: Callable[[str], None] = print,
) -> list[str]:
    """Write and validate the folder ``out`` for the rows; returns the last round's problems (empty: done)."""
    draft = out.parent / f".{out.name}.draft"
    messages = [{"role": "user", "content": first_prompt(name, train, evals)}]
    problems: list[str] = []
    for n in range(1, rounds + 1):
        answer = chat(messages)
        messages.append({"role": "assistant", "content": answer})
        try:
            files, columns = parse_reply(answer)
            write_draft(draft, name, files, columns, train, evals)
            problems = validate(draft, quote=False)  # the driver reads them: no item, nothing its code said
        except ReplyError as exc:
            problems = [str(exc)]
        say(f"round {n}: " + ("valid" if not problems else f"{len(problems)} problem(s)"))
        if not problems:
            draft.rename(out)
            return []
        messages.append(
            {
                "role": "user",
                "content": "The validator found these problems; answer with the whole "
                "corrected JSON object:\n" + "\n".join(problems),
            }
        )
    return problems
