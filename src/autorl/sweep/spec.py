"""A study's spec (``sweep.toml``, YAML or a dict) and its expansion into cells, each with a stable run key.

The top-level keys are ``autorl run``'s option names, each a value or a list; lists expand as a matrix (their
cross product), ``[[include]]`` tables add cells and ``[[exclude]]`` tables drop the cells they match. Tables
(``agent_env``, ``benchmark_options``) are one value; a list of tables expands like any list.
``agent_credentials`` (names of the caller's variables passed to the agent) is one list, not an axis.
"""

from __future__ import annotations

import difflib
import itertools
import json
import math
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

from autorl.errors import UsageError
from autorl.runs.spec import RunSpec
from autorl.sweep.records import CellIdentity, CellOptions, CellRecord, CellRule, StudySpec

#: the options of one cell, with their defaults (``None``: required or ``autorl run``'s own default)
CELL_DEFAULTS: CellRule = {
    "agent": None,
    "task": None,
    "model": None,
    "seed": 0,
    "timeout": None,
    "limit": None,
    "backend": None,
    "gpus": 0,
    "grader_gpus": None,
    "sandbox": "auto",
    "network": "on",
    "agent_env": {},
    "agent_credentials": [],
    "benchmark_options": {},
    "audit": True,
    "audit_budget": 900.0,
    "decoys": True,
    "llm_budget_usd": None,
    "llm_budget_tokens": None,
    "audit_judge": None,
    "audit_judge_samples": 1,
    "test_all": True,
    "off_target": [],
}
#: keys that describe the study, not a cell
STUDY_KEYS = ("name", "include", "exclude", "retries", "max_parallel", "executor", "slurm", "ray", "local")
REQUIRED = ("agent", "task", "model", "timeout")
#: options a table is the value of (a list of tables expands)
TABLE_KEYS = ("agent_env", "benchmark_options")
#: options a list is the value of (a list of lists expands)
LIST_KEYS = ("agent_credentials", "off_target")
SANDBOXES = ("auto", "bwrap", "none")
NETWORKS = ("on", "off")


@dataclass(frozen=True)
class Cell:
    """One run of a study: its options and the key that identifies its result."""

    options: CellOptions
    run_key: str = ""
    identity: CellIdentity | None = None

    def __getitem__(self, name: str) -> Any:
        return self.options[name]  # type: ignore[literal-required]  # any option, by its name

    @classmethod
    def from_record(cls, record: CellRecord) -> Cell:
        """A cell as ``cells.json`` keeps it."""
        return cls(options=record["options"], run_key=record["run_key"], identity=record["identity"])

    @property
    def label(self) -> str:
        o = self.options
        return f"{o['agent']} / {o['task']} / {o['model']} / seed {o['seed']}"

    def as_dict(self) -> CellRecord:
        if self.identity is None:
            raise ValueError(f"the cell {self.label} has no identity yet (Resolver.identify gives it one)")
        return {"run_key": self.run_key, "options": self.options, "identity": self.identity}

    def run_spec(self) -> RunSpec:
        """What this cell's run is (:class:`~autorl.runs.spec.RunSpec`), as ``autorl run`` is asked for it: the
        GPUs and the runs' folder are the executor's to give."""
        o = self.options
        return RunSpec.build(
            o["agent"],
            o["task"],
            o["model"],
            float(o["timeout"]),
            seed=o["seed"],
            limit=o["limit"],
            backend=o["backend"],
            sandbox=o["sandbox"],
            network=o["network"],
            agent_env=o["agent_env"],
            agent_credentials=tuple(o["agent_credentials"]),
            benchmark_options=o["benchmark_options"],
            audit=o["audit"],
            audit_budget_s=float(o["audit_budget"]),
            audit_judge=o.get("audit_judge") or None,
            audit_judge_samples=o.get("audit_judge_samples", 1),
            decoys=o.get("decoys") is not False,
            llm_budget_usd=o["llm_budget_usd"],
            llm_budget_tokens=o["llm_budget_tokens"],
            test_all=o["test_all"],
            off_target=tuple(o["off_target"]),
        )

    def run_args(self) -> list[str]:
        """``autorl run``'s arguments for this cell (without ``--gpus``, ``--runs-dir`` and ``--json``)."""
        return self.run_spec().cli_args()


def _yaml_no_duplicates() -> Any:
    import yaml

    class Loader(yaml.SafeLoader):
        pass

    def mapping(loader: Loader, node: Any, deep: bool = False) -> dict[Any, Any]:
        seen: set[Any] = set()
        for key_node, _ in node.value:
            key = loader.construct_object(key_node, deep=deep)
            if key in seen:
                raise UsageError(f"spec: key {key!r} appears twice (line {key_node.start_mark.line + 1})")
            seen.add(key)
        return dict(loader.construct_mapping(node, deep=deep))

    Loader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, mapping)
    return Loader


def load_spec(source: str | Path | Mapping[str, Any]) -> StudySpec:
    """The spec from a mapping (copied), a ``.toml`` file or a ``.yaml``/``.yml``/``.json`` file, its every key a
    cell option or a study key (a one-line error names an unknown one, with the closest); the values are
    checked when the spec is expanded (:func:`expand_options`)."""
    if isinstance(source, Mapping):
        return _known_keys(json.loads(json.dumps(dict(source), default=str)))  # a deep copy of plain values
    path = Path(source).expanduser()
    try:
        text = path.read_text()
    except OSError as exc:
        raise UsageError(f"cannot read the sweep spec {path}: {exc.strerror or exc}") from None
    if path.suffix == ".toml":
        try:
            import tomllib
        except ImportError:  # Python 3.10
            from autorl.errors import MissingDependencyError

            raise MissingDependencyError("a TOML sweep spec on Python 3.10", "tomli") from None
        try:
            data: Any = tomllib.loads(text)
        except tomllib.TOMLDecodeError as exc:
            raise UsageError(f"spec {path}: {exc}") from None
    elif path.suffix in (".yaml", ".yml", ".json"):
        import yaml

        try:
            data = yaml.load(text, Loader=_yaml_no_duplicates())
        except yaml.YAMLError as exc:
            raise UsageError(f"spec {path}: {str(exc).splitlines()[0]}") from None
    else:
        raise UsageError(f"spec {path}: use a .toml, .yaml or .json file")
    if not isinstance(data, dict):
        raise UsageError(f"spec {path}: the top level must be a table of options")
    return _known_keys(data)


def _known_keys(spec: Any) -> StudySpec:
    for name in spec:
        _check_key(str(name), "")
    return cast(StudySpec, spec)


def executor_options(spec: StudySpec, executor: str) -> dict[str, Any]:
    """The spec's table of settings for ``executor`` (``[local]``, ``[slurm]``, ``[ray]``); empty when it has none."""
    tables = {"local": spec.get("local"), "slurm": spec.get("slurm"), "ray": spec.get("ray")}
    return dict(tables.get(executor) or {})


def _check_key(name: str, where: str) -> None:
    if name in CELL_DEFAULTS or name in STUDY_KEYS:
        return
    close = difflib.get_close_matches(name, [*CELL_DEFAULTS, *STUDY_KEYS], n=1, cutoff=0.6)
    hint = f"; did you mean {close[0]!r}?" if close else f"; options: {', '.join(CELL_DEFAULTS)}"
    raise UsageError(f"spec: unknown option {name!r}{where}{hint}")


def _values(name: str, value: Any) -> list[Any]:
    if name in LIST_KEYS and isinstance(value, list) and not any(isinstance(v, list) for v in value):
        return [value]  # one list of names; a list of such lists expands
    if isinstance(value, list):
        if not value:
            raise UsageError(f"spec: {name} is an empty list")
        return value
    return [value]


def check_options(o: dict[str, Any]) -> CellOptions:
    """One cell's options (as the spec gave them, defaults filled in), checked and normalised; a one-line error
    names the field."""
    for name in REQUIRED:
        if o.get(name) in (None, ""):
            raise UsageError(f"spec: {name} is required")
    for name in ("agent", "task", "model", "sandbox", "network"):
        if not isinstance(o[name], str):
            raise UsageError(f"spec: {name} must be a string, not {o[name]!r}")
    if o["audit_judge"] is not None and (not isinstance(o["audit_judge"], str) or not o["audit_judge"].strip()):
        raise UsageError(f"spec: audit_judge must be a model name, not {o['audit_judge']!r}")
    if (
        isinstance(o["audit_judge_samples"], bool)
        or not isinstance(o["audit_judge_samples"], int)
        or o["audit_judge_samples"] < 1
    ):
        raise UsageError(f"spec: audit_judge_samples must be a positive integer, not {o['audit_judge_samples']!r}")
    if o["backend"] is not None and not isinstance(o["backend"], str):
        raise UsageError(f"spec: backend must be a string, not {o['backend']!r}")
    if isinstance(o["seed"], bool) or not isinstance(o["seed"], int):
        raise UsageError(f"spec: seed must be an integer, not {o['seed']!r}")
    for name, positive in (("timeout", True), ("audit_budget", True), ("llm_budget_usd", True)):
        v = o[name]
        if v is None:
            continue
        if isinstance(v, bool) or not isinstance(v, int | float) or not math.isfinite(v) or (positive and v <= 0):
            raise UsageError(f"spec: {name} must be a positive number, not {v!r}")
        o[name] = float(v)
    for name, low in (("limit", 1), ("gpus", 0), ("grader_gpus", 0), ("llm_budget_tokens", 1)):
        v = o[name]
        if v is not None and (isinstance(v, bool) or not isinstance(v, int) or v < low):
            raise UsageError(f"spec: {name} must be an integer of at least {low}, not {v!r}")
    if o["grader_gpus"] is not None and o["grader_gpus"] > o["gpus"]:
        raise UsageError(f"spec: grader_gpus ({o['grader_gpus']}) is more than gpus ({o['gpus']})")
    if o["sandbox"] not in SANDBOXES:
        raise UsageError(f"spec: sandbox must be one of {', '.join(SANDBOXES)}, not {o['sandbox']!r}")
    if o["network"] not in NETWORKS:
        raise UsageError(f"spec: network must be on or off, not {o['network']!r}")
    if not isinstance(o["audit"], bool):
        raise UsageError(f"spec: audit must be true or false, not {o['audit']!r}")
    if not isinstance(o["decoys"], bool):
        raise UsageError(f"spec: decoys must be true or false, not {o['decoys']!r}")
    if not isinstance(o["test_all"], bool):
        raise UsageError(f"spec: test_all must be true or false, not {o['test_all']!r}")
    for name in TABLE_KEYS:
        if not isinstance(o[name], dict) or not all(isinstance(k, str) and k for k in o[name]):
            raise UsageError(f"spec: {name} must be a table of NAME = value")
    if not all(isinstance(v, str | int | float) and not isinstance(v, bool) for v in o["agent_env"].values()):
        raise UsageError("spec: agent_env values must be strings or numbers")
    o["agent_env"] = {k: str(v) for k, v in o["agent_env"].items()}
    names = o["agent_credentials"]
    if not isinstance(names, list) or not all(isinstance(n, str) and n for n in names):
        raise UsageError("spec: agent_credentials must be a list of variable names")
    o["agent_credentials"] = sorted(set(names))
    tasks = o["off_target"]
    if not isinstance(tasks, list) or not all(isinstance(n, str) and n for n in tasks):
        raise UsageError("spec: off_target must be a list of benchmark names")
    o["off_target"] = list(dict.fromkeys(tasks))
    return cast(CellOptions, o)  # every field checked above


def _matches(cell: Mapping[str, Any], rule: Mapping[str, Any]) -> bool:
    return all(cell.get(k) == v or (isinstance(v, list) and cell.get(k) in v) for k, v in rule.items())


def _rules(spec: Mapping[str, Any], name: str) -> list[CellRule]:
    rules = spec.get(name, [])
    if isinstance(rules, dict):
        rules = [rules]
    if not isinstance(rules, list) or not all(isinstance(r, dict) and r for r in rules):
        raise UsageError(f"spec: {name} must be a list of tables ([[{name}]])")
    for r in rules:
        for k in r:
            if k not in CELL_DEFAULTS:
                _check_key(k, f" in [[{name}]]")
                raise UsageError(f"spec: {k!r} is not a cell option and cannot appear in [[{name}]]")
    return rules


def expand_options(spec: Mapping[str, Any]) -> list[CellOptions]:
    """Every cell's options, in matrix order (lists expanded), then ``include``; ``exclude`` applied."""
    for name in spec:
        _check_key(str(name), "")
    given = {k: v for k, v in spec.items() if k in CELL_DEFAULTS}
    axes = {k: _values(k, v) for k, v in given.items()}
    includes, excludes = _rules(spec, "include"), _rules(spec, "exclude")
    base = {k: v for k, v in CELL_DEFAULTS.items()}
    cells: list[dict[str, Any]] = []
    if all(given.get(k) is not None for k in ("agent", "task", "model")) or not includes:
        names = list(axes)
        for combo in itertools.product(*(axes[n] for n in names)):
            cells.append({**base, **dict(zip(names, combo, strict=True))})
    scalars = {k: v[0] for k, v in axes.items() if len(v) == 1}
    for inc in includes:
        for combo in itertools.product(*(_values(k, v) for k, v in inc.items())):
            cells.append({**base, **scalars, **dict(zip(inc, combo, strict=True))})
    cells = [c for c in cells if not any(_matches(c, rule) for rule in excludes)]
    if not cells:
        raise UsageError("spec: no cell left (every cell is excluded)")
    return [check_options(json.loads(json.dumps(c))) for c in cells]  # each a plain copy, checked


def study_name(spec: Mapping[str, Any], default: str) -> str:
    name = spec.get("name", default)
    if (
        not isinstance(name, str)
        or not name
        or not all(ch.isalnum() or ch in "-_." for ch in name)
        or name.startswith(".")
    ):
        raise UsageError(f"spec: name must be letters, digits, '-', '_' or '.', not {name!r}")
    return name
