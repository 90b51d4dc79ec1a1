"""Is an rl-smith folder sound? Its config, its scorer, its splits and what the agent would be given.

``static_problems`` reads files only (it runs on every discovery); ``validate`` also prepares the folder as
grading does (the grader's copy, checked against the folder's version, ``download_data.py``, the split drawn
with a scratch secret) and runs ``evaluate`` as the grader does, under the scorer policy
(:mod:`autorl.sandbox.scorer`), on a sample of the hidden items: each reference answer must score 1.0 and each
corrupted one less. The folder is hashed before and after; a folder that changed meanwhile is refused. Every
problem is one line naming the file it is about.
"""

from __future__ import annotations

import random
import re
import shutil
import tempfile
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from autorl_smith.folder import FolderError, SmithFolder, eval_file, load_folder

SAMPLE = 8
NONSENSE = "zq-not-an-answer-zq"
_NUMBER_KEYS = ("max_new_tokens", "temperature", "eval_timeout_s", "batch_size", "timeout_s")


def normalized(text: object) -> str:
    """Text compared by content: lower case, punctuation and runs of spaces folded into one space."""
    return " ".join(re.sub(r"[^\w\s]", " ", str(text).lower()).split())


def _config_problems(config: dict[str, Any]) -> list[str]:
    out = []
    template = config.get("prompt_template", "{question}")
    try:
        if not isinstance(template, str) or "{question}" not in template:
            raise ValueError
        template.format(question="q")
    except (ValueError, KeyError, IndexError):
        out.append("config.yaml: prompt_template must be a string holding {question} and no other field")
    for key in _NUMBER_KEYS:
        value = config.get(key)
        if value is None:
            continue
        if type(value) not in (int, float) or (value < 0 if key == "temperature" else value <= 0):
            kind = "a number >= 0" if key == "temperature" else "a positive number"
            out.append(f"config.yaml: {key} must be {kind}, not {value!r}")
    shots = config.get("few_shot") or []
    if not isinstance(shots, list) or not all(
        isinstance(s, dict) and {"question", "answer"} <= s.keys() for s in shots
    ):
        out.append("config.yaml: few_shot must be a list of {question, answer}")
    stop = config.get("stop") or []
    if not isinstance(stop, list) or not all(isinstance(s, str) and s for s in stop):
        out.append("config.yaml: stop must be a list of non-empty strings")
    own = config.get("opencompass_dataset")
    if own is not None and not (
        isinstance(own, dict)
        and all(isinstance(v, str) for v in own.values())
        and set(own) <= {"human_prompt", "bot_prompt"}
    ):
        out.append(
            "config.yaml: opencompass_dataset must be a mapping of human_prompt, bot_prompt to text (the "
            "items scored are the hidden split; a named OpenCompass dataset is not read)"
        )
    return out


def static_problems(folder: SmithFolder) -> list[str]:
    """What reading the folder's files shows, without running any of its code."""
    path, config = folder.path, folder.config
    out = _config_problems(config)
    description = path / "description.md"
    if not description.is_file() or not description.read_text(errors="replace").strip():
        out.append("description.md: missing or empty (the agent's task statement)")
    held = eval_file(path, config)
    for rel in folder.expose_files:
        target = (path / rel).resolve()
        if (path / "data").resolve() in target.parents or (held is not None and target == held.resolve()):
            out.append(
                f"config.yaml: exposed file {rel!r} is data the agent must not get (under data/ or the eval file)"
            )
    return out


def _agent_view(bench: Any, root: Path) -> tuple[Path, dict[str, list[Any]]]:
    """Prepare ``bench`` under ``root`` as a run does: what the agent gets (train data, description, exposed
    files) in one folder, and the hidden items per split."""
    hidden, agent = root / "hidden", root / "agent"
    hidden.mkdir(mode=0o700)
    agent.mkdir()
    bench.hidden_dir = hidden
    bench.prepare_eval_data(hidden)
    bench.prepare_train_data(agent)
    (agent / "description.md").write_text(bench.description())
    for name, source in bench.exposed_files().items():
        shutil.copyfile(source, agent / f"exposed-{name}")
    return agent, {split: bench.load_items(split, hidden) for split in bench.splits}


def _leak_problems(agent: Path, items: dict[str, list[Any]], config: dict[str, Any], quote: bool = True) -> list[str]:
    from autorl import read_jsonl
    from autorl.audit import Source, check_overlap

    out = []
    train = {normalized(r.get("question", "")) for r in read_jsonl(agent / "train.jsonl") if isinstance(r, dict)}
    shots = {normalized(s.get("question", "")) for s in config.get("few_shot") or [] if isinstance(s, dict)}
    for split, its in items.items():
        both = [i for i in its if normalized(i.input.get("question", "")) in train]
        if both:
            example = f", e.g. {str(both[0].input.get('question'))[:80]!r}" if quote else ""
            out.append(
                f"data/train.jsonl: {len(both)} of {len(its)} {split} items are in the agent's training data "
                f"(same text once normalized){example}"
            )
        in_shots = [i for i in its if normalized(i.input.get("question", "")) in shots]
        if in_shots:
            out.append(f"config.yaml: {len(in_shots)} {split} items are few-shot examples in every prompt")
    if not any(p.startswith("data/train.jsonl") for p in out):
        for flag in check_overlap(agent, items, sources=[Source(agent)]):
            split = flag.name.split("-items")[0]
            files = [e for e in flag.evidence if not e.startswith(f"{split} item ")]
            out.append(
                f"{len(flag.evidence) - len(files)} of {len(items[split])} hidden {split} items are derivable "
                f"from what the agent gets ({', '.join(files)[:120]}): the run's audit would flag every run"
            )
    return out


def _corruptions(reference: str, others: Sequence[str]) -> list[str]:
    """Answers that are wrong for ``reference``: empty, nonsense, another item's answer, digits changed."""
    wrong = ["", NONSENSE]
    other = next((o for o in others if normalized(o) != normalized(reference)), None)
    if other is not None:
        wrong.append(other)
    if any(c.isdigit() for c in reference):
        wrong.append("".join(str((int(c) + 1) % 10) if c.isdigit() else c for c in reference))
    return wrong


#: the scorer's own words for a result it could not read (:mod:`autorl_smith.scorer`)
FIXED_ERRORS = (
    "evaluate exited before returning",
    "evaluate wrote more than its result",
    "evaluate's result is not JSON",
    "evaluate's result has no score",
)


def error_kind(error: str) -> str:
    """What a scorer's error says without a word ``evaluate`` chose: the built-in exception's class, or one of the
    scorer's own fixed phrases; an exception class of the code's own, a returned value's text: their kind only."""
    import builtins

    head = error.split(":", 1)[0].strip()
    if (
        head.isidentifier()
        and isinstance(getattr(builtins, head, None), type)
        and issubclass(getattr(builtins, head), BaseException)
    ):
        return head
    if error.startswith("evaluate returned"):
        return "evaluate returned something other than a number in [0, 1]"
    if error in FIXED_ERRORS:
        return error
    return "an exception of eval.py's own class"


def scorer_problems(bench: Any, items: Iterable[Any], sample: int = SAMPLE, quote: bool = True) -> list[str]:
    """``evaluate`` on a sample, in the grader's scorer process: 1.0 for references, less for wrong answers.
    Without ``quote`` the lines hold no item's text and nothing ``evaluate`` chose (its error messages, its
    exceptions' class names, a score's digits beyond two): what a driver model that wrote ``eval.py`` may read."""
    from autorl_smith.scorer import Request, score_all

    pool = list(items)
    chosen = random.Random(0).sample(pool, min(sample, len(pool)))
    refs = [str(i.reference) for i in pool]
    plan: list[tuple[Any, str, bool]] = []
    for k, item in enumerate(chosen):
        plan.append((item, str(item.reference), True))
        plan += [(item, w, False) for w in _corruptions(str(item.reference), refs[k + 1 :] + refs[: k + 1])]
    from autorl_smith.benchmark import folder_places

    work = bench._prepare_folder()
    scored = score_all(
        work,
        [Request(str(i.input.get("question", "")), a, str(i.reference)) for i, a, _ in plan],
        bench.timeout_s(),
        bench.folder.eval_digest,
        masked=folder_places(bench.folder),
    )
    out = []
    missed = [(i, s) for (i, _, right), s in zip(plan, scored, strict=True) if right and s.score != 1.0]
    if missed:
        item, s = missed[0]
        if quote:
            why = f": {s.error}" if s.error else ""
            out.append(
                f"eval.py: evaluate gave less than 1.0 to the reference answer of {len(missed)} of "
                f"{len(chosen)} sampled items, e.g. {s.score} to {str(item.reference)[:60]!r}{why}"
            )
        else:
            why = f": {error_kind(s.error)}" if s.error else ""
            out.append(
                f"eval.py: evaluate gave less than 1.0 to the reference answer of {len(missed)} of "
                f"{len(chosen)} sampled items, e.g. {s.score:.2f}{why}"
            )
    accepted = [(i, a) for (i, a, right), s in zip(plan, scored, strict=True) if not right and s.score >= 1.0]
    if accepted:
        n_wrong = sum(1 for _, _, right in plan if not right)
        item, answer = accepted[0]
        example = f", e.g. {answer[:60]!r} for reference {str(item.reference)[:60]!r}" if quote else ""
        out.append(f"eval.py: evaluate gave 1.0 to {len(accepted)} of {n_wrong} wrong answers{example}")
    return out


def validate(path: Path, sample: int = SAMPLE, quote: bool = True) -> list[str]:
    """Every problem of the folder at ``path``, one line each (an empty list: the folder is sound). The folder is
    hashed before and after: one that changed meanwhile is refused, since what was judged is not what is there.
    Without ``quote`` no line quotes an item or what the folder's code printed or raised (the lines a driver model
    reads, :mod:`autorl_smith.generate`)."""
    from autorl.sandbox import folder_digest

    try:
        before = folder_digest(path)
    except OSError as exc:
        return [f"the folder cannot be read: {exc.strerror or exc}"]
    out = _problems(path, sample, quote)
    try:
        changed = folder_digest(path) != before
    except OSError:
        changed = True
    if changed:
        out.append(
            "the folder changed while it was validated (its code wrote to it, or something else did): "
            "refused; validate it again"
        )
    return out


def _problems(path: Path, sample: int, quote: bool) -> list[str]:
    from autorl import AutorlError
    from autorl_smith.benchmark import SmithBenchmark, version_of

    try:
        folder = load_folder(path)
    except (FolderError, OSError, UnicodeDecodeError) as exc:
        return [str(exc)]
    out = static_problems(folder)
    cls = type(
        f"Smith_{folder.name}",
        (SmithBenchmark,),
        {"name": folder.task, "version": version_of(folder), "folder": folder, "source": folder.path},
    )
    bench = cls()
    with tempfile.TemporaryDirectory(prefix="autorl-smith-validate-") as tmp:
        try:
            agent, items = _agent_view(bench, Path(tmp))
        except (AutorlError, OSError, KeyError, ValueError) as exc:
            why = f": {str(exc).splitlines()[0][:300]}" if quote else f" ({type(exc).__name__})"
            return [*out, f"preparing the data as grading does failed{why}"]
        out += _leak_problems(agent, items, folder.config, quote)
        if folder.eval_mode == "per_sample":  # the opencompass mode scores with OpenCompass's exact match
            try:
                out += scorer_problems(bench, [i for its in items.values() for i in its], sample, quote)
            except AutorlError as exc:  # the scorer could not run, or its folder changed meanwhile
                out.append(f"eval.py: {exc}" if quote else f"eval.py: the scorer could not run ({type(exc).__name__})")
    return out
