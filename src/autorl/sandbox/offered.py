"""What a benchmark plugin offers its agent, checked before the agent starts (:func:`check_offered`).

A plugin is third-party content: the variables its ``agent_env()`` returns and the files its ``agent_paths()``
and ``exposed_files()`` show are looked through before the run starts, for the hidden items (the audit's n-gram
check, :mod:`autorl.audit.overlap`, on the text as given, URL-decoded and with its base64, hex and rot13 runs
decoded; the variables also read together, as items split across them would; a variable naming a file the agent
can read, that file) and for every key the harness holds (the upstreams', the credential
variables', the hidden-item secret, and any variable of the operator's named like a key); and a path shown may
be neither a folder that holds a masked one (the home, autorl's storage) nor anything inside the home's hidden
folders, where keys are kept (``~/.config``, ``~/.ssh``, ``~/.local/share``...). A hit refuses the run in one
line naming the plugin and the variable or file. What the operator hands the agent on purpose
(``--agent-env``, ``--agent-credential``) is the operator's choice and not looked for.
"""

from __future__ import annotations

import contextlib
import os
import re
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from autorl.errors import UsageError
from autorl.sandbox.agent import refuse_uncovering
from autorl.sandbox.host import inside, operator_homes, python_paths

if TYPE_CHECKING:
    from autorl.audit.budget import Budget
    from autorl.audit.overlap import NgramIndex
    from autorl.benchmark import Benchmark
    from autorl.scoring import Item

#: names of the operator's variables that hold keys, whatever the service
KEY_NAME = re.compile(r"(^|_)(KEY|TOKEN|SECRET|PASSWORD|PASSWD|CREDENTIAL|PAT|AUTH)S?($|_)", re.IGNORECASE)
#: a value shorter than this is no key worth looking for (and would match by chance)
MIN_KEY = 8
#: time for reading the files a benchmark shows
BUDGET_S = 120.0


def key_values(
    hidden_dir: Path | None = None, environ: Mapping[str, str] | None = None, given: Mapping[str, str] | None = None
) -> list[str]:
    """Every key the harness holds: the upstreams' keys, the credential variables' values, the hidden-item secret
    (``AUTORL_HIDDEN_SECRET``, or ``hidden_dir/secret`` in hex), and the value of every variable named like a key
    (``*_KEY``, ``*_TOKEN``, ``*SECRET*``...), but those the operator gives the agent (``given``)."""
    from autorl.gateway.agent_env import secret_values

    env = os.environ if environ is None else environ
    passed = set((given or {}).values())
    values = set(secret_values(env))
    values |= {v for k, v in env.items() if KEY_NAME.search(k) and len(v.strip()) >= MIN_KEY}
    if hidden_dir is not None:
        with contextlib.suppress(OSError):
            values.add((hidden_dir / "secret").read_bytes().hex())
    return sorted(v for v in values if len(v) >= MIN_KEY and v not in passed)


def _holds_key(text: str, keys: Sequence[str]) -> bool:
    folded = text.casefold()  # the hidden-item secret is hex: its case does not matter
    return any(k.casefold() in folded for k in keys)


def _hidden_items(benchmark: Benchmark, hidden_dir: Path) -> dict[str, list[Item]]:
    """The hidden items to look for: every split's, but dev where the benchmark's dev split is public data."""
    out = {}
    for split in benchmark.splits:
        if split == "dev" and benchmark.dev_public:
            continue
        try:
            out[split] = benchmark.load_items(split, hidden_dir)
        except Exception:  # a split that cannot be read holds nothing to look for
            continue
    return out


def _texts(path: Path, budget: Budget) -> Iterator[tuple[str, str]]:
    """(where, text) of what a shown file or folder holds, read as the audit reads an agent's files."""
    from autorl.audit.scan import Source, agent_texts, file_texts

    real = path.resolve()  # what the sandbox shows: the file where a link leads
    if real.is_dir():
        for text in agent_texts([Source(real, label=str(path) + os.sep)], budget):
            yield text.where, text.text
    elif real.is_file():
        try:
            texts = list(file_texts(real.parent, real.name, str(path), budget))
        except Exception:  # unreadable: it cannot be vouched for
            budget.unscanned.append(str(path))
            return
        for text in texts:
            yield text.where, text.text


def _in_hidden_home_folder(path: Path, homes: Sequence[Path]) -> Path | None:
    """The hidden entry of a home (``~/.config``...) that ``path`` is or lies in, if any."""
    for home in homes:
        for p in dict.fromkeys((path, path.resolve())):
            if p != home and home in p.parents:
                top = home / p.relative_to(home).parts[0]
                if top.name.startswith("."):
                    return top
    return None


def check_offered(
    benchmark: Benchmark,
    hidden_dir: Path,
    *,
    plugin: str,
    masked: Sequence[Path],
    given: Mapping[str, str] | None = None,
    environ: Mapping[str, str] | None = None,
) -> None:
    """Refuse (a one-line :class:`UsageError` naming ``plugin`` and the variable or file) what ``benchmark``
    offers its agent that holds a hidden item or a key, or shows what the policy masks. ``masked`` are the
    agent's masked folders, ``given`` what the operator passes the agent itself."""
    who = f"{plugin}: benchmark {benchmark.name}"
    try:
        variables = {str(k): str(v) for k, v in benchmark.agent_env().items()}
        files = [Path(p) for p in [*benchmark.agent_paths(), *benchmark.exposed_files().values()]]
    except UsageError:
        raise
    except Exception as exc:  # a plugin's failure is one line, never a traceback
        raise UsageError(
            f"{who}: what it shows its agent cannot be read ({type(exc).__name__}: "
            f"{str(exc).splitlines()[0][:200] if str(exc) else ''}): refused"
        ) from None
    if not variables and not files:
        return
    refuse_uncovering(f"{who}: agent_paths()", files, masked)
    homes = operator_homes(environ)
    seen_anyway = python_paths()
    for path in files:
        hidden_folder = _in_hidden_home_folder(path, homes)
        if hidden_folder is not None and not any(inside(path.resolve(), p) for p in seen_anyway):
            raise UsageError(
                f"{who} shows its agent {path}, inside {hidden_folder} (the home's hidden folders, where "
                "keys are kept): refused"
            )
    keys = key_values(hidden_dir, environ, given)
    from autorl.audit.overlap import NgramIndex

    items = _hidden_items(benchmark, hidden_dir)
    index = NgramIndex((split, item) for split, its in items.items() for item in its)
    together = (
        {
            "together": " ".join(variables.values()),
            "together, name order": " ".join(v for _, v in sorted(variables.items())),
        }
        if len(variables) > 1
        else {}
    )
    for name, value in [*variables.items(), *together.items()]:
        what = f"agent_env() variable {name}" if name in variables else f"agent_env()'s variables read {name}"
        found = _found(value, keys, index)
        if found:
            raise UsageError(f"{who}: {what} holds {found}: refused")
    # a variable naming a file the agent can read points it at what that file holds
    try:
        hidden = [*masked, *benchmark.hidden_paths()]
    except Exception:  # its own failure stops the run where the policy is built; here, the masks alone
        hidden = list(masked)
    files += [
        Path(v)
        for v in variables.values()
        if os.path.isabs(v) and os.path.isfile(v) and _visible(Path(v), hidden, seen_anyway)
    ]
    from autorl.audit.budget import Budget

    budget = Budget(BUDGET_S)
    for path in files:
        for where, text in _texts(path, budget):
            found = _found(text, keys, index)
            if found:
                raise UsageError(f"{who} shows its agent {where}, which holds {found}: refused")
    if budget.spent or budget.unscanned:
        what = "in time" if budget.spent else f"whole ({budget.unscanned[0]} could not be read)"
        raise UsageError(f"{who}: the files it shows its agent could not be checked {what}: refused")


def _found(text: str, keys: Sequence[str], index: NgramIndex) -> str | None:
    """What ``text``, read every way the agent could read it, holds: a key of the harness's or hidden items."""
    for reading in readings(text):
        if _holds_key(reading, keys):
            return "a key of the harness's"
        hits = index.matches(reading)
        if hits:
            return _items(hits)
    return None


def readings(text: str) -> list[str]:
    """``text`` as given, URL-decoded, and what its base64, hex and rot13 runs say (:mod:`autorl.audit.encoded`)."""
    from urllib.parse import unquote_plus

    from autorl.audit.encoded import decoded_runs

    out = [text]
    plain = unquote_plus(text)
    if plain != text:
        out.append(plain)
    return out + [run.text for given in out for run in decoded_runs(given)]


def _visible(path: Path, hidden: Sequence[Path], seen_anyway: Sequence[Path]) -> bool:
    """Whether the agent reads ``path``: outside what its policy masks, or inside what it shows again anyway."""
    real = path.resolve()
    if any(inside(real, p) for p in seen_anyway):
        return True
    return not any(inside(q, h) or inside(q, h.resolve()) for q in (path, real) for h in hidden)


def _items(hits: set[str]) -> str:
    splits = sorted({h.split(":", 1)[0] for h in hits})
    return f"{len(hits)} hidden item(s) of the {' and '.join(splits)} split"
