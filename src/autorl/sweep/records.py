"""The records of a study, as they are written into its folder and read back (:mod:`autorl.sweep.store`): a cell's
options and identity (``cells.json``), what an attempt runs (``payload.json``) and how it ended
(``outcome.json``), and the spec as ``sweep.json`` keeps it (the report's records are in
:mod:`autorl.sweep.report_records`). Each is JSON on disk: read back, it is checked where it is used (a folder
another process or an older version wrote may lack a key)."""

from __future__ import annotations

from typing import Any, TypedDict

__all__ = [
    "AgentIdentity",
    "CellIdentity",
    "CellOptions",
    "CellRecord",
    "CellRule",
    "LLMBudget",
    "ModelIdentity",
    "Outcome",
    "Payload",
    "StudySpec",
    "TaskIdentity",
]


class CellOptions(TypedDict):
    """One cell's options (:data:`autorl.sweep.spec.CELL_DEFAULTS` names them), checked and normalised by
    :func:`autorl.sweep.spec.check_options`."""

    agent: str
    task: str
    model: str
    seed: int
    timeout: float
    limit: int | None
    backend: str | None
    gpus: int
    grader_gpus: int | None
    sandbox: str
    network: str
    agent_env: dict[str, str]
    agent_credentials: list[str]
    benchmark_options: dict[str, Any]  # the benchmark plugin's own options: open
    audit: bool
    audit_budget: float
    decoys: bool
    llm_budget_usd: float | None
    llm_budget_tokens: int | None
    audit_judge: str | None
    audit_judge_samples: int
    test_all: bool
    off_target: list[str]


#: where an agent comes from: its folder, or its class (the keys absent for the other)
_AgentSource = TypedDict("_AgentSource", {"folder": str, "class": str}, total=False)


class AgentIdentity(_AgentSource):
    """An agent's identity: its name and the hash of its folder's files or its distribution's version."""

    name: str
    hash: str


class TaskIdentity(TypedDict):
    """A task's identity: its name, version, the hash of its eval config and options, its plugin's version."""

    name: str
    version: str
    eval_config_hash: str
    plugin: str


class _ModelVersion(TypedDict, total=False):
    revision: str
    hash: str


class ModelIdentity(_ModelVersion):
    """A base model's identity: its id and its revision (hub, built-in) or its files' hash (local)."""

    id: str


class LLMBudget(TypedDict):
    usd: float | None
    tokens: int | None


class GpuShare(TypedDict):
    count: int
    grader: int


class SandboxPolicy(TypedDict):
    mode: str
    network: str


class AuditIdentity(TypedDict):
    enabled: bool
    budget_s: float


class JudgeIdentity(TypedDict):
    model: str
    samples: int


class _IdentityExtras(TypedDict, total=False):
    agent_credentials: list[str]
    audit_judge: JudgeIdentity
    decoys: bool
    test_all: bool
    off_target: list[str]


class CellIdentity(_IdentityExtras):
    """Everything that changes a cell's result (:meth:`autorl.sweep.keys.Resolver.identify`); its canonical JSON's
    hash is the cell's run key. The keys marked not required are present only when they differ from the default,
    so that the keys of earlier studies stay as they were."""

    agent: AgentIdentity
    task: TaskIdentity
    model: ModelIdentity
    seed: int
    timeout: float
    backend: str
    gpus: GpuShare
    sandbox: SandboxPolicy
    limit: int | None
    audit: AuditIdentity
    agent_env: dict[str, str]
    llm_budget: LLMBudget
    autorl_version: str


class CellRecord(TypedDict):
    """A cell as ``cells.json`` keeps it."""

    run_key: str
    options: CellOptions
    identity: CellIdentity


class _PlacedPayload(TypedDict, total=False):
    disk_need: int | None
    scratch: str


class Payload(_PlacedPayload):
    """What an attempt runs (``payload.json``): ``autorl run``'s arguments, the cell's options, the homes; the
    executor adds the GPUs it gave and the disk the run needs."""

    run_key: str
    attempt: int
    sweep: str
    sweep_id: str
    sweep_dir: str
    args: list[str]
    options: CellOptions
    home: str
    gpus: list[str] | None
    program: list[str] | None


class Outcome(TypedDict, total=False):
    """How an attempt ended (``outcome.json``): ``kind`` :data:`~autorl.sweep.store.RESULT` or
    :data:`~autorl.sweep.store.INFRA` and why; a result's success and improvement; where and when."""

    kind: str
    reason: str
    success: bool
    improvement: float | None
    recorded: bool
    finished: float
    duration_s: float
    host: str


class CellRule(TypedDict, total=False):
    """Cell options as a spec gives them: each a value or a list of values (checked when the spec is expanded:
    :func:`autorl.sweep.spec.expand_options`). A spec's top level, an ``[[include]]`` and an ``[[exclude]]`` table
    hold them."""

    agent: Any
    task: Any
    model: Any
    seed: Any
    timeout: Any
    limit: Any
    backend: Any
    gpus: Any
    grader_gpus: Any
    sandbox: Any
    network: Any
    agent_env: Any
    agent_credentials: Any
    benchmark_options: Any
    audit: Any
    audit_budget: Any
    decoys: Any
    llm_budget_usd: Any
    llm_budget_tokens: Any
    audit_judge: Any
    audit_judge_samples: Any
    test_all: Any
    off_target: Any


class StudySpec(CellRule, total=False):
    """A study's spec, its keys checked (:func:`autorl.sweep.spec.load_spec`), as ``sweep.json`` keeps it: the
    cell options and the study's own keys."""

    name: str
    include: Any  # a table or a list of tables (CellRule), checked when the spec is expanded
    exclude: Any
    retries: int
    max_parallel: int
    executor: str
    #: each executor's own settings (open: an executor's options)
    local: dict[str, Any]
    slurm: dict[str, Any]
    ray: dict[str, Any]
