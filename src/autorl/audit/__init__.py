"""The post-run cheat audit: deterministic checks whose evidence is file paths and hidden item ids.

Checks: n-gram overlap between what the agent wrote and the hidden items (dev: proof of a leak, since dev
items are never public, unless the benchmark declares ``dev_public``; test: a strong flag), attempts to
reach hidden locations (refused submissions) and downloads of benchmark data or post-trained variants of
the base model, weight distances to the base (and to known variants, LoRA adapters merged onto the base),
edits of the files the harness provided, chat-template changes, score patterns (a dev/test gap; many
near-identical submissions probing the grader), the isolation the agent had and the planted decoys it used (a
token presented to a service, a canary where honest work never puts one: :mod:`autorl.decoys`).
Hidden item text never appears in a flag.

What is scanned is everything the agent could write: its workspace, its ``/tmp`` (a host directory the
runner gave the sandbox), the grader's snapshots of its submissions and the copies of files the runner saw
during the run (deleted ones too). Files are read through :mod:`autorl.untrusted` (no link followed:
the targets of links are either scanned where they lie or not the agent's writing), text is taken from
inside gzip, bz2, xz, zip and tar files (decompressed bytes and members capped, so a bomb costs nothing)
and from the printable runs of binary files (like ``strings``); a file larger than the scan limit is
sampled (its head and tail), never skipped. The audit runs within a time budget and survives any file:
what it could not finish is itself a flag.

Text the agent wrote in base64, hex or rot13 is read decoded as well, and text aimed at the auditor (an order
or a verdict addressed to it, verdict-shaped text, forged prompt delimiters) is the ``judge-steering`` flag.

Modules: :mod:`~autorl.audit.flags` (what a flag is), :mod:`~autorl.audit.scan` (the agent's texts and the walk's
limits), :mod:`~autorl.audit.unpack` (a file's bytes out of archives and compression, and what they leave out),
:mod:`~autorl.audit.budget` (the time budget), :mod:`~autorl.audit.encoded`, :mod:`~autorl.audit.overlap`
(hidden items in them), :mod:`~autorl.audit.downloads`, :mod:`~autorl.audit.steering`,
:mod:`~autorl.audit.weights` (the submitted checkpoints), :mod:`~autorl.audit.checks` (what the run
recorded) and :mod:`~autorl.audit.report` (auditing one run); the judged audit is :mod:`autorl.audit.judge`.
"""

from __future__ import annotations

from autorl.audit.budget import AUDIT_BUDGET_S, Budget
from autorl.audit.checks import (
    ISOLATED_MODES,
    check_harness,
    check_refusals,
    check_sandbox,
    check_scores,
    harness_hashes,
)
from autorl.audit.downloads import DownloadCheck, check_downloads
from autorl.audit.flags import CRITICAL, HIGH, INFO, MEDIUM, Flag, failed_flag, pending_flag
from autorl.audit.overlap import SHORT_N, STANDARD_N, NgramIndex, check_overlap, overlap_flags
from autorl.audit.report import add_taken_decoys, audit_run, reaudit
from autorl.audit.scan import (
    HARNESS_FILES,
    MAX_FILES,
    Source,
    Text,
    agent_files,
    agent_texts,
    as_text,
    blob_texts,
    file_texts,
    seen_files,
)
from autorl.audit.unpack import (
    MAX_ARCHIVE_BYTES,
    MAX_DECOMPRESSED,
    MAX_FILE_BYTES,
    MAX_MEMBER_BYTES,
    MAX_MEMBERS,
    MAX_NESTING,
    SAMPLE_HEAD_BYTES,
    SAMPLE_TAIL_BYTES,
)
from autorl.audit.weights import check_weights, merged_lora, weight_distance

# the decompression cap is tested on its own, under the names it had before the audit was a package

__all__ = [
    "AUDIT_BUDGET_S",
    "CRITICAL",
    "HARNESS_FILES",
    "HIGH",
    "INFO",
    "ISOLATED_MODES",
    "MAX_ARCHIVE_BYTES",
    "MAX_DECOMPRESSED",
    "MAX_FILES",
    "MAX_FILE_BYTES",
    "MAX_MEMBERS",
    "MAX_MEMBER_BYTES",
    "MAX_NESTING",
    "MEDIUM",
    "SAMPLE_HEAD_BYTES",
    "SAMPLE_TAIL_BYTES",
    "SHORT_N",
    "STANDARD_N",
    "Budget",
    "DownloadCheck",
    "Flag",
    "NgramIndex",
    "Source",
    "Text",
    "add_taken_decoys",
    "agent_files",
    "agent_texts",
    "as_text",
    "audit_run",
    "blob_texts",
    "check_downloads",
    "check_harness",
    "check_overlap",
    "check_refusals",
    "check_sandbox",
    "check_scores",
    "check_weights",
    "failed_flag",
    "file_texts",
    "harness_hashes",
    "merged_lora",
    "overlap_flags",
    "pending_flag",
    "reaudit",
    "seen_files",
    "weight_distance",
]
