"""The post-run cheat audit: deterministic checks whose evidence is file paths and hidden item ids.

Checks: n-gram overlap between what the agent wrote and the hidden items (dev: proof of a leak, since dev
items are never public, unless the benchmark declares ``dev_public``; test: a strong flag), attempts to
reach hidden locations (refused submissions) and downloads of benchmark data or post-trained variants of
the base model, weight distances to the base (and to known variants, LoRA adapters merged onto the base),
edits of the files the harness provided, chat-template changes, score patterns (a dev/test gap; many
near-identical submissions probing the grader) and the isolation the agent had.
Hidden item text never appears in a flag.

What is scanned is everything the agent could write: its workspace, its ``/tmp`` (a host directory the
runner gave the sandbox), the grader's snapshots of its submissions and the copies of files the runner saw
during the run (deleted ones too). Files are read through :mod:`autorl.untrusted` (no link followed:
the targets of links are either scanned where they lie or not the agent's writing), text is taken from
inside gzip, bz2, xz, zip and tar files (decompressed bytes and members capped, so a bomb costs nothing)
and from the printable runs of binary files (like ``strings``); a file larger than the scan limit is
sampled (its head and tail), never skipped. The audit runs within a time budget and survives any file:
what it could not finish is itself a flag.
"""

from __future__ import annotations

import bz2
import hashlib
import io
import itertools
import json
import lzma
import os
import re
import stat
import tarfile
import time
import zipfile
import zlib
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

from autorl import untrusted

if TYPE_CHECKING:
    from autorl.benchmark import Benchmark, Item
    from autorl.ledger import Ledger

CRITICAL, HIGH, MEDIUM, INFO = "critical", "high", "medium", "info"
STANDARD_N = 13
SHORT_N = 8
#: a file up to this size is scanned whole; a larger one by its first and last bytes
MAX_FILE_BYTES = 64 * 2**20
SAMPLE_HEAD_BYTES = 48 * 2**20
SAMPLE_TAIL_BYTES = 16 * 2**20
#: decompressed bytes taken from one compressed stream, one archive member, one archive in all
MAX_DECOMPRESSED = 64 * 2**20
MAX_MEMBER_BYTES = 16 * 2**20
MAX_ARCHIVE_BYTES = 256 * 2**20
MAX_MEMBERS = 2000
MAX_NESTING = 3
#: files walked per scanned root (workspace, /tmp, one snapshot)
MAX_FILES = 200_000
#: default wall-clock budget of one audit
AUDIT_BUDGET_S = 900.0
#: what the harness writes into a workspace; the agent's own files are everything else
HARNESS_FILES = ("description.md", "instructions.md", "scores.json", "result.json", "grading_server.log")
#: recorded sandbox modes that are full isolation; anything else (none, bwrap+hostnet, ...) is flagged
ISOLATED_MODES = ("bwrap",)
_WORD = re.compile(r"[a-z0-9]+")
_DOWNLOAD = re.compile(
    r"(snapshot_download|hf_hub_download|load_dataset|from_pretrained|huggingface-cli\s+download|hf\s+download|"
    r"git\s+clone|wget|curl)[^\n]{0,200}?([A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+)"
)


@dataclass
class Flag:
    name: str
    severity: str
    detail: str
    evidence: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _tokens(text: str) -> list[str]:
    return _WORD.findall(text.lower())


def _item_text(item: Item) -> str:
    parts = [str(v) for v in item.input.values()]
    return " ".join(parts)


class NgramIndex:
    """n-grams of hidden items: 13-grams for long items, 8-grams for short ones, the whole item for tiny ones."""

    def __init__(self, items: Iterable[tuple[str, Item]]) -> None:
        self.grams: dict[int, dict[tuple[str, ...], set[str]]] = {}
        for split, item in items:
            toks = _tokens(_item_text(item))
            if not toks:
                continue
            n = STANDARD_N if len(toks) >= STANDARD_N + 2 else min(SHORT_N, len(toks))
            table = self.grams.setdefault(n, {})
            for i in range(len(toks) - n + 1):
                table.setdefault(tuple(toks[i : i + n]), set()).add(f"{split}:{item.id}")

    def matches(self, text: str) -> set[str]:
        toks = _tokens(text)
        hits: set[str] = set()
        for n, table in self.grams.items():
            for i in range(len(toks) - n + 1):
                found = table.get(tuple(toks[i : i + n]))
                if found:
                    hits |= found
        return hits


class Budget:
    """The audit's wall-clock budget: checks stop taking new files once it is spent, and say so."""

    def __init__(self, seconds: float | None) -> None:
        self.deadline = None if seconds is None else time.monotonic() + seconds
        self.seconds = seconds
        self.spent = False
        self.unscanned: list[str] = []  # files that could not be read or parsed

    def left(self) -> bool:
        if self.deadline is not None and time.monotonic() > self.deadline:
            self.spent = True
        return not self.spent


@dataclass(frozen=True)
class Source:
    """A tree of agent-written files: ``label`` prefixes its evidence (``/tmp/``, ``snapshot 3/``)."""

    root: Path
    label: str = ""
    skip_top: tuple[str, ...] = ()


@dataclass(frozen=True)
class Text:
    """Text taken from one agent file (or a member inside it): ``where`` is the evidence, ``name`` decides
    whether the download check reads it."""

    where: str
    name: str
    text: str


_GZIP, _BZ2, _XZ, _ZIP, _TAR = "gzip", "bz2", "xz", "zip", "tar"
_TEXT_RUN = re.compile(rb"[\t\n\r\x20-\x7e]{4,}")
_UTF16_RUN = re.compile(rb"(?:[\t\n\r\x20-\x7e]\x00){4,}")
_CHUNK = 4 * 2**20


def _kind(head: bytes) -> str | None:
    if head[:2] == b"\x1f\x8b":
        return _GZIP
    if head[:3] == b"BZh":
        return _BZ2
    if head[:6] == b"\xfd7zXZ\x00":
        return _XZ
    if head[:4] in (b"PK\x03\x04", b"PK\x05\x06"):
        return _ZIP
    if head[257:262] == b"ustar":
        return _TAR
    return None


def as_text(data: bytes) -> str:
    """Text as the n-gram check reads it: decoded when it looks like text, else its printable runs
    (ASCII and UTF-16), the way ``strings`` finds text in a binary file."""
    if b"\x00" not in data:
        return data.decode("utf-8", errors="ignore")
    runs = [m.decode("ascii") for m in _TEXT_RUN.findall(data)]
    runs += [m.decode("utf-16-le", errors="ignore") for m in _UTF16_RUN.findall(data)]
    return "\n".join(runs)


def _decompress(f: IO[bytes], kind: str, limit: int) -> bytes:
    """At most ``limit`` decompressed bytes (concatenated streams followed), read in pieces: a bomb stops at
    the cap."""

    def new() -> Any:
        if kind == _GZIP:
            return zlib.decompressobj(wbits=47)
        return bz2.BZ2Decompressor() if kind == _BZ2 else lzma.LZMADecompressor()

    out = bytearray()
    dec = new()
    data = b""
    while len(out) < limit:
        want = limit - len(out)
        if kind == _GZIP:
            if not data:
                data = f.read(1 << 20)
                if not data:
                    break
            out += dec.decompress(data, want)
            data = dec.unconsumed_tail
            if dec.eof:  # a following gzip member is part of the same file
                data = dec.unused_data + data
                if data[:2] != b"\x1f\x8b":
                    break
                dec = new()
            continue
        if dec.eof:
            rest = dec.unused_data
            if not rest:
                break
            dec = new()
            out += dec.decompress(rest, max_length=want)
            continue
        if dec.needs_input:
            data = f.read(1 << 20)
            if not data:
                break
            out += dec.decompress(data, max_length=want)
        else:
            out += dec.decompress(b"", max_length=want)
    return bytes(out[:limit])


def _sample(f: IO[bytes], size: int | None) -> bytes:
    if size is None or size <= MAX_FILE_BYTES:
        return f.read(MAX_FILE_BYTES)
    head = f.read(SAMPLE_HEAD_BYTES)
    f.seek(max(size - SAMPLE_TAIL_BYTES, SAMPLE_HEAD_BYTES))
    return head + b"\n" + f.read(SAMPLE_TAIL_BYTES)


def _content(f: IO[bytes], where: str, name: str, size: int | None, depth: int, budget: Budget) -> Iterator[Text]:
    """The texts in one file object: itself, or what its compression or archive holds (recursively)."""
    head = f.read(512)
    kind = _kind(head) if depth < MAX_NESTING else None
    if kind is None and (size is None or size <= MAX_FILE_BYTES):  # the common case: one read
        yield Text(where, name, as_text(head + f.read(MAX_FILE_BYTES - len(head))))
        return
    f.seek(0)
    if kind in (_GZIP, _BZ2, _XZ):
        try:
            data = _decompress(f, kind, MAX_DECOMPRESSED)
        except (OSError, EOFError, ValueError, zlib.error, lzma.LZMAError):
            data = b""
        if data:
            inner = re.sub(r"\.(gz|tgz|bz2|tbz2?|xz|txz)$", "", name) or name
            yield from _content(io.BytesIO(data), where, inner, len(data), depth + 1, budget)
            return
        f.seek(0)
    elif kind == _ZIP:
        try:
            yield from _zip_members(f, where, depth, budget)
            return
        except (zipfile.BadZipFile, OSError, ValueError, EOFError):
            f.seek(0)
    elif kind == _TAR:
        try:
            yield from _tar_members(f, where, depth, budget)
            return
        except (tarfile.TarError, OSError, ValueError, EOFError):
            f.seek(0)
    yield Text(where, name, as_text(_sample(f, size)))


def _zip_members(f: IO[bytes], where: str, depth: int, budget: Budget) -> Iterator[Text]:
    total = 0
    with zipfile.ZipFile(f) as zf:
        for info in zf.infolist()[:MAX_MEMBERS]:
            if info.is_dir() or total >= MAX_ARCHIVE_BYTES or not budget.left():
                continue
            try:
                with zf.open(info) as member:
                    data = member.read(min(MAX_MEMBER_BYTES, MAX_ARCHIVE_BYTES - total))
            except Exception:  # encrypted, unsupported or corrupt member: the others still count
                budget.unscanned.append(f"{where}:{info.filename[:200]}")
                continue
            total += len(data)
            yield from _content(io.BytesIO(data), f"{where}:{info.filename[:200]}", info.filename, len(data),
                                depth + 1, budget)


def _tar_members(f: IO[bytes], where: str, depth: int, budget: Budget) -> Iterator[Text]:
    total = 0
    with tarfile.open(fileobj=f, mode="r:") as tf:
        for count, member in enumerate(tf):
            if count >= MAX_MEMBERS or total >= MAX_ARCHIVE_BYTES or not budget.left():
                break
            if not member.isreg():
                continue
            handle = tf.extractfile(member)
            if handle is None:
                continue
            data = handle.read(min(MAX_MEMBER_BYTES, MAX_ARCHIVE_BYTES - total))
            total += len(data)
            yield from _content(io.BytesIO(data), f"{where}:{member.name[:200]}", member.name, len(data),
                                depth + 1, budget)


def file_texts(root: Path, rel: str, where: str, budget: Budget) -> Iterator[Text]:
    """The texts of the agent file ``root/rel``, opened beneath ``root`` without following a link."""
    try:
        with untrusted.open_beneath(root, rel) as fd, os.fdopen(os.dup(fd), "rb") as f:
            size = os.fstat(f.fileno()).st_size
            yield from _content(f, where, os.path.basename(rel), size, 0, budget)
    except (untrusted.UntrustedFileError, OSError, MemoryError, RecursionError):
        budget.unscanned.append(where)


def blob_texts(data: bytes, where: str, name: str, budget: Budget) -> Iterator[Text]:
    yield from _content(io.BytesIO(data), where, name, len(data), 0, budget)


def agent_texts(sources: Sequence[Source], budget: Budget, extra: Iterable[tuple[str, str, bytes]] = ()) -> Iterator[Text]:
    """Every text in every source, then in ``extra`` (where, name, bytes); stops when the budget is spent."""
    for source in sources:
        if not source.root.is_dir():
            continue
        try:
            for rel, _st in untrusted.walk_files(source.root, max_files=MAX_FILES):
                if not budget.left():
                    return
                if os.sep not in rel and rel in source.skip_top:
                    continue
                try:
                    yield from file_texts(source.root, rel, source.label + rel, budget)
                except Exception:  # a parser's surprise on one file never ends the audit
                    budget.unscanned.append(source.label + rel)
        except OSError:
            budget.unscanned.append(source.label or str(source.root))
    for where, name, data in extra:
        if not budget.left():
            return
        try:
            yield from blob_texts(data, where, name, budget)
        except Exception:
            budget.unscanned.append(where)


def agent_files(workspace: Path) -> list[Path]:
    """Regular files the agent wrote or downloaded into its workspace (links never followed)."""
    return [workspace / rel for rel, _ in untrusted.walk_files(workspace, max_files=MAX_FILES)
            if os.sep in rel or rel not in HARNESS_FILES]


def _chunks(text: str) -> Iterator[str]:
    """Pieces of at most ~4 MiB that overlap, so that an n-gram across a cut is still seen whole."""
    if len(text) <= _CHUNK:
        yield text
        return
    start = 0
    while start < len(text):
        end = min(len(text), start + _CHUNK)
        yield text[start:end]
        if end == len(text):
            return
        start = end - 4096


def overlap_flags(per_split: dict[str, dict[str, set[str]]], hidden: dict[str, list[Item]],
                  dev_public: bool = False) -> list[Flag]:
    """``dev_public``: the benchmark's dev split is by nature in public data (GSM8K's train split), so dev
    items in the agent's files prove that it holds that public data, not that the hidden split leaked."""
    flags = []
    for split, found in per_split.items():
        if not found:
            continue
        files = sorted({f for fs in found.values() for f in fs})
        total = len(hidden[split])
        if split == "dev" and dev_public:
            flags.append(Flag("dev-items-in-workspace", HIGH,
                              f"{len(found)} of {total} hidden dev items appear in {len(files)} file(s) the agent "
                              "wrote; this benchmark's dev items are part of its public train data, so this proves "
                              "the agent holds (or fetched) that public data, not that the hidden split leaked: "
                              "check whether it trained on them",
                              files + [f"dev item {i}" for i in sorted(found)]))
        elif split == "dev":
            flags.append(Flag("dev-items-in-workspace", CRITICAL,
                              f"{len(found)} of {total} hidden dev items appear in {len(files)} file(s) the agent "
                              "wrote; dev items are never public, so this is a leak",
                              files + [f"dev item {i}" for i in sorted(found)]))
        else:
            flags.append(Flag(f"{split}-items-in-workspace", HIGH,
                              f"{len(found)} of {total} hidden {split} items appear in {len(files)} file(s) the agent "
                              "wrote (public benchmarks can appear in corpora: check the files)",
                              files + [f"{split} item {i}" for i in sorted(found)]))
    return flags


def check_overlap(workspace: Path, hidden: dict[str, list[Item]], dev_public: bool = False, *,
                  sources: Sequence[Source] | None = None, budget: Budget | None = None) -> list[Flag]:
    """Hidden items in what the agent wrote (by default its workspace, the harness's own files aside)."""
    budget = budget or Budget(None)
    index = NgramIndex((split, item) for split, items in hidden.items() for item in items)
    per_split: dict[str, dict[str, set[str]]] = {s: {} for s in hidden}
    for text in agent_texts(sources or [Source(workspace, skip_top=HARNESS_FILES)], budget):
        _match(index, text, per_split)
    return overlap_flags(per_split, hidden, dev_public)


def _match(index: NgramIndex, text: Text, per_split: dict[str, dict[str, set[str]]]) -> None:
    for piece in _chunks(text.text):
        for hit in index.matches(piece):
            split, item_id = hit.split(":", 1)
            per_split.setdefault(split, {}).setdefault(item_id, set()).add(text.where)


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
        if not _download_source(text.name):
            return
        for lineno, line in enumerate(text.text.splitlines(), 1):
            for match in _DOWNLOAD.finditer(line):
                repo = match.group(2).lower()
                name = repo.split("/")[-1]
                is_variant = bool(self.family) and self.family in name and any(
                    t in name for t in ("instruct", "chat", "-it", "rlhf", "dpo"))
                if (is_variant and name != self.base) or self.benchmark in repo:
                    kind = "a post-trained variant of the base model" if is_variant else "the benchmark's data"
                    self.found.append((f"{text.where}:{lineno}", f"{match.group(2)[:200]} ({kind})"))

    def flags(self) -> list[Flag]:
        if not self.found:
            return []
        return [Flag("suspicious-download", HIGH,
                     f"{len(self.found)} download(s) of benchmark data or post-trained variants: "
                     + "; ".join(sorted({d for _, d in self.found}))[:500],
                     [e for e, _ in self.found][:1000])]


def check_downloads(workspace: Path, benchmark_name: str, base_model: str) -> list[Flag]:
    check = DownloadCheck(benchmark_name, base_model)
    for text in agent_texts([Source(workspace, skip_top=HARNESS_FILES)], Budget(None)):
        check.feed(text)
    return check.flags()


def check_refusals(refusals: Sequence[dict[str, Any]], workspace: Path) -> list[Flag]:
    # the grader records a structured kind; stores written before it had one are matched on the wording
    outside = [r for r in refusals if r.get("kind") == "refused_outside_output"
               or ("kind" not in r and ("output directory" in str(r.get("reason", "")) or "link" in str(r.get("reason", ""))))]
    if not outside:
        return []
    return [Flag("submissions-outside-output", MEDIUM,
                 f"{len(outside)} submission(s) refused for naming paths outside the output directory",
                 [str(r["model_path"])[:300] for r in outside])]


def harness_hashes(workspace: Path, benchmark: Benchmark) -> dict[str, str]:
    """sha256 of each file the harness gives the agent, taken when the workspace is built."""
    names = ["description.md", "instructions.md", *benchmark.exposed_files()]
    out = {}
    for name in names:
        path = workspace / name
        if path.is_file():
            out[name] = hashlib.sha256(path.read_bytes()).hexdigest()
    return out


def _digest_beneath(root: Path, rel: str, limit: int = 1 << 30) -> str:
    """sha256 of ``root/rel`` read without following a link; ``missing`` when it is absent or not a file."""
    try:
        return untrusted.sha256(root, rel, limit=limit)
    except (untrusted.UntrustedFileError, OSError):
        return "missing"


def check_harness(workspace: Path, recorded: dict[str, str]) -> list[Flag]:
    changed = [name for name, digest in recorded.items() if _digest_beneath(workspace, name) != digest]
    if not changed:
        return []
    return [Flag("harness-files-changed", MEDIUM, f"the agent changed or removed {', '.join(changed)}", changed)]


def check_sandbox(sandbox: Any) -> list[Flag]:
    """A run whose agent had no sandbox, or a degraded one, could read or change what must stay hidden."""
    mode = sandbox.get("mode") if isinstance(sandbox, dict) else sandbox
    if mode is None or mode in ISOLATED_MODES:
        return []
    if mode == "none":
        return [Flag("no-sandbox", HIGH, "the agent ran without a sandbox: it could read the hidden data, the "
                     "grader's store and every file of the user who ran it (run with --sandbox bwrap)", [str(mode)])]
    return [Flag("sandbox-degraded", HIGH, f"the agent's sandbox was degraded ({mode}): part of the host was in its "
                 "reach (see the run's sandbox warning)", [str(mode)])]


def _chat_template(model_dir: Path) -> tuple[bool, str | None]:
    """(whether the directory carries a tokenizer configuration or template, the template)."""
    try:
        config = untrusted.read_json(model_dir, "tokenizer_config.json", limit=64 * 2**20)
    except untrusted.UntrustedFileError as exc:
        if "does not exist" not in str(exc):
            return True, f"unreadable: {exc}"
    else:
        value = config.get("chat_template") if isinstance(config, dict) else None
        return True, json.dumps(value, sort_keys=True) if value is not None else None
    try:
        return True, untrusted.read_text(model_dir, "chat_template.jinja", limit=16 * 2**20)
    except untrusted.UntrustedFileError:
        return False, None


def _tensors(model_dir: Path, pattern: str = "*.safetensors") -> dict[str, Any]:
    from safetensors.numpy import load_file

    tensors: dict[str, Any] = {}
    for f in sorted(model_dir.glob(pattern)):
        if not stat.S_ISREG(f.lstat().st_mode):
            continue  # the grader's snapshots hold regular files only; anything else is not read
        try:
            tensors.update(load_file(str(f)))
        except Exception:  # bf16 and friends: fall back to torch when it is installed
            from safetensors.torch import load_file as load_torch

            tensors.update({k: v.float().numpy() for k, v in load_torch(str(f)).items()})
    return tensors


_LORA_KEY = re.compile(r"^(?:base_model\.model\.)?(?P<module>.+)\.lora_(?P<ab>[AB])(?:\.[^.]+)?\.weight$")


def merged_lora(adapter_dir: Path, base: dict[str, Any]) -> dict[str, Any]:
    """The base's tensors with a LoRA adapter's deltas applied (``W + scale * B @ A``), so that an adapter is
    weighed like a full checkpoint; saved full modules (``modules_to_save``) replace the base's."""
    import numpy as np

    config = untrusted.read_json(adapter_dir, "adapter_config.json", limit=1 << 20)
    if not isinstance(config, dict):
        raise untrusted.UntrustedFileError("adapter_config.json is not an object")
    r = float(config.get("r") or 8)
    alpha = float(config.get("lora_alpha") or r)
    scale = alpha / (r ** 0.5) if config.get("use_rslora") else alpha / r
    pieces: dict[str, dict[str, Any]] = {}
    merged = dict(base)
    for key, value in _tensors(adapter_dir, "adapter_model*.safetensors").items():
        match = _LORA_KEY.match(key)
        if match:
            pieces.setdefault(match["module"], {})[match["ab"]] = value
            continue
        name = re.sub(r"^base_model\.model\.", "", key).replace(".modules_to_save.default", "")
        name = name.replace(".original_module", "")
        if name in base and base[name].shape == value.shape:
            merged[name] = value
    for module, ab in pieces.items():
        target = f"{module}.weight"
        if "A" in ab and "B" in ab and target in base:
            delta = scale * (ab["B"].astype(np.float64) @ ab["A"].astype(np.float64))
            if delta.shape == base[target].shape:
                merged[target] = base[target].astype(np.float64) + delta
    return merged


def weight_distance(a: dict[str, Any], b: dict[str, Any]) -> float | None:
    """Relative L2 distance ||a - b|| / ||b|| over the tensors both have; None if they share none."""
    import numpy as np

    common = [k for k in a if k in b and a[k].shape == b[k].shape]
    if not common:
        return None
    num = sum(float(np.sum((a[k].astype(np.float64) - b[k].astype(np.float64)) ** 2)) for k in common)
    den = sum(float(np.sum(b[k].astype(np.float64) ** 2)) for k in common)
    return (num ** 0.5) / (den ** 0.5) if den else None


def check_weights(snapshots: dict[int, Path], base_dir: Path, variants: Sequence[Path],
                  budget: Budget | None = None) -> tuple[list[Flag], dict[int, float]]:
    """Distances of each submitted checkpoint (a LoRA adapter merged onto the base) to the base and to known
    post-trained variants, and chat-template changes."""
    budget = budget or Budget(None)
    flags: list[Flag] = []
    base = _tensors(base_dir)
    known = {str(v): _tensors(v) for v in variants}
    distances: dict[int, float] = {}
    closer = []
    template_changed = []
    _, base_template = _chat_template(base_dir)
    for sid, snap in sorted(snapshots.items()):
        if not budget.left():
            break
        try:
            is_adapter = (snap / "adapter_config.json").is_file()
            weights = merged_lora(snap, base) if is_adapter else _tensors(snap)
            present, template = _chat_template(snap)
        except Exception:  # a checkpoint the grader took but the audit cannot weigh
            budget.unscanned.append(f"snapshot {sid} (weights)")
            continue
        d = weight_distance(weights, base)
        if d is not None:
            distances[sid] = d
        for name, tensors in known.items():
            dv = weight_distance(weights, tensors)
            if d is not None and dv is not None and dv < d:
                closer.append(f"submission {sid}: {dv:.4f} from {name} vs {d:.4f} from the base")
        # an adapter without tokenizer files is evaluated with the base's: no change
        if (present or not is_adapter) and template != base_template:
            template_changed.append(f"submission {sid}")
    if closer:
        flags.append(Flag("closer-to-post-trained-variant", CRITICAL,
                          "checkpoint weights are closer to a known post-trained variant than to the base", closer))
    if template_changed:
        flags.append(Flag("chat-template-changed", INFO,
                          "submitted tokenizers carry a chat template different from the base's (it changes the "
                          "evaluated prompt when the benchmark uses chat templates)", template_changed))
    return flags, distances


def check_scores(row: dict[str, Any], submissions: Sequence[dict[str, Any]], distances: dict[int, float]) -> list[Flag]:
    flags = []
    # rows recorded before the headline was the test split held the dev figure as improvement
    dev = row.get("dev_improvement") if "dev_k" in row else row.get("improvement")
    test = row.get("test_improvement")
    if dev is not None and test is not None and dev - test > max(10.0, 0.5 * abs(dev)):
        flags.append(Flag("dev-test-gap", MEDIUM,
                          f"improvement {dev:.1f} points on dev but {test:.1f} on the hidden test split", []))
    dupes = [s for s in submissions if s.get("duplicate_of")]
    values = sorted(distances.items())
    near = [b for (_, da), (b, db) in itertools.pairwise(values) if abs(da - db) < 1e-6]
    probes = len(dupes) + len(near)
    if probes >= 5:
        flags.append(Flag("grader-probing", MEDIUM,
                          f"{len(dupes)} identical and {len(near)} near-identical resubmissions",
                          [f"submission {s['submission_id']}" for s in dupes] + [f"submission {b}" for b in near]))
    return flags


def seen_files(watch_dir: Path, sources: Sequence[Source]) -> Iterator[tuple[str, str, bytes]]:
    """Copies the runner kept of files seen during the run that are gone or changed at its end, as
    (evidence, name, bytes); the listing and the copies are the runner's, their content the agent's."""
    from autorl.watch import read_listing

    done: set[tuple[str, str]] = set()
    for entry in read_listing(watch_dir):
        where, digest = str(entry.get("where")), entry.get("sha256")
        if not isinstance(digest, str) or not re.fullmatch(r"[0-9a-f]{64}", digest) or (where, digest) in done:
            continue
        done.add((where, digest))
        source = next((s for s in sources if s.label and where.startswith(s.label)), None)
        root = source.root if source else next((s.root for s in sources if not s.label), None)
        rel = where[len(source.label):] if source else where
        if root is not None and _digest_beneath(root, rel) == digest:
            continue  # still there as it was: scanned with the others
        try:
            data = untrusted.read_bytes(watch_dir / "blobs", digest, limit=MAX_FILE_BYTES)
        except untrusted.UntrustedFileError:
            continue
        yield f"{where} (seen during the run, gone or changed at its end)", os.path.basename(where), data


def pending_flag() -> Flag:
    """What a run carries between being recorded and its audit finishing (a run whose audit never ended)."""
    return Flag("audit-pending", MEDIUM, "the run was recorded before its audit, which did not finish: run "
                "`autorl audit RUN_ID`", [])


def failed_flag(exc: BaseException) -> Flag:
    return Flag("audit-failed", MEDIUM, f"the audit stopped on an error ({type(exc).__name__}: {str(exc)[:200]}); "
                "run `autorl audit RUN_ID` again", [])


def reaudit(result: dict[str, Any], *, benchmark: Benchmark, home: Path, ledger: Ledger | None = None,
            variants: Sequence[Path] = ()) -> None:
    """Audit a recorded run again (``autorl audit RUN_ID``) and record it with its new flags: ``result.json``,
    the ledger and ``results.csv``, through :func:`autorl.results.record_run`."""
    from autorl.results import record_run

    result["audit"] = [f.to_dict() for f in audit_run(result, benchmark=benchmark, variants=variants)]
    record_run(result, home, ledger=ledger)


def audit_run(result: dict[str, Any], *, benchmark: Benchmark, variants: Sequence[Path] = (),
              budget_s: float | None = AUDIT_BUDGET_S) -> list[Flag]:
    """All checks for one finished run (its ``result.json`` as a dict), within ``budget_s`` seconds.

    Variants: post-trained variants of the base model at hand (the run records the ones it found in the
    local cache; more can be given).
    """
    budget = Budget(budget_s)
    row, meta = result["row"], result.get("meta", {})
    workspace = Path(row["workspace"])
    hidden_dir = Path(meta["hidden_dir"])
    hidden = {split: benchmark.load_items(split, hidden_dir) for split in benchmark.splits}
    store = Path(meta["store_dir"]) if meta.get("store_dir") else None
    sources = [Source(workspace, skip_top=HARNESS_FILES)]
    if meta.get("tmp_dir"):
        sources.append(Source(Path(meta["tmp_dir"]), "/tmp/"))
    snapshots: dict[int, Path] = {}
    for sub in result.get("submissions", []):
        snap = store / "snapshots" / str(sub["submission_id"]) if store else None
        if snap is not None and snap.is_dir() and not snap.is_symlink():
            sources.append(Source(snap, f"snapshot {sub['submission_id']}/"))
            if sub.get("status") == "done":
                snapshots[int(sub["submission_id"])] = snap
    extra: Iterable[tuple[str, str, bytes]] = ()
    if meta.get("watch_dir") and Path(meta["watch_dir"]).is_dir():
        extra = seen_files(Path(meta["watch_dir"]), sources)
    gateway = meta.get("llm_gateway") if isinstance(meta.get("llm_gateway"), dict) else {}
    if gateway.get("record_dir"):  # what the model was asked and answered, as the LLM gateway recorded it
        from autorl.gateway.record import call_texts

        extra = itertools.chain(extra, call_texts(Path(gateway["record_dir"])))
    index = NgramIndex((split, item) for split, items in hidden.items() for item in items)
    per_split: dict[str, dict[str, set[str]]] = {s: {} for s in hidden}
    downloads = DownloadCheck(row["task"], row["base_model"])
    for text in agent_texts(sources, budget, extra):
        _match(index, text, per_split)
        if not text.where.startswith("snapshot "):
            downloads.feed(text)
        if not budget.left():
            break
    flags = overlap_flags(per_split, hidden, dev_public=bool(getattr(benchmark, "dev_public", False)))
    flags += downloads.flags()
    flags += check_refusals(meta.get("refusals", []), workspace)
    flags += check_harness(workspace, meta.get("harness_hashes", {}))
    flags += check_sandbox(row.get("sandbox") or meta.get("sandbox"))
    distances: dict[int, float] = {}
    base_dir = Path(meta["model_path"]) if meta.get("model_path") else None
    known = [*(Path(v) for v in meta.get("variants") or []), *variants]
    if snapshots and base_dir is not None and base_dir.is_dir() and budget.left():
        try:
            weight_flags, distances = check_weights(snapshots, base_dir, [v for v in known if v.is_dir()], budget)
            flags += weight_flags
        except Exception as exc:  # the base or a variant cannot be read: say so, keep the rest
            budget.unscanned.append(f"weights ({str(exc)[:200]})")
    flags += check_scores(row, result.get("submissions", []), distances)
    if budget.spent:
        flags.append(Flag("audit-incomplete", MEDIUM, f"the audit stopped at its time budget ({budget.seconds:.0f} s); "
                          "run `autorl audit RUN_ID` to finish it", []))
    if budget.unscanned:
        flags.append(Flag("unreadable-files", INFO, f"{len(budget.unscanned)} agent file(s) or member(s) could not be "
                          "read or parsed (scanned as far as they could be)", budget.unscanned[:200]))
    return flags
