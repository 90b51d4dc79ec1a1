"""A pytest plugin for plugin authors (loaded automatically through the ``pytest11`` entry point).

Fixtures:
    autorl_pm: a fresh plugin manager for one test, installed as the process-wide one and restored after.
    register_plugin: ``register_plugin(module_or_object, name=..., distribution=...)`` adds a plugin to
        ``autorl_pm`` for one test, as if a distribution had installed it.
    autorl_home: an empty ``AUTORL_HOME`` for one test.
    tiny_model: the path of the built-in tiny model, built once per session.
    local_grader: ``local_grader(task, base_model=None, backend="hf")`` starts a real grader on 127.0.0.1.

Functions and classes:
    check_benchmark_end_to_end(task, model="autorl:tiny", limit=3, options=None): runs ``autorl eval`` as a
        user would, then checks the hidden-items contract on the benchmark.
    check_hidden_items_secret(benchmark, root): the hidden-items contract (docs/plugins/benchmarks.md): an
        empty hidden folder gives a one-line HiddenDataError, two secrets give different items and hashes, the
        operator's AUTORL_HIDDEN_SECRET reproduces them, preparing again keeps them.
    check_train_data_holds_no_hidden_item(benchmark, root): the agent's training data holds no hidden item, as
        the run's audit looks for them.
    prepare_as_a_run(benchmark, root): the hidden items and the training data prepared under ``root`` as a run
        prepares them; returns the hidden folder.
    check_agent_view(benchmark, root): what the benchmark offers its agent (``agent_env()``, ``agent_paths()``,
        ``exposed_files()``) passes the check a run makes before its agent starts: no hidden item, no key, nothing
        that shows a masked folder or the home's hidden folders.
    check_claims_score_zero(benchmark, hidden, claims): an interactive benchmark's policy that answers with
        words that claim success scores 0 on every item, each played to its end.
    check_hardening(benchmark, root, ...): every hardening check (:mod:`autorl.hardening`): hidden items not
        rebuilt by another secret beyond chance, none loaded without prepared items, adversarial completions
        score 0, the description and training data hold no hidden item; fails naming each hole.
    assert_plugin_discovered(name, distribution): ``autorl plugins`` lists the plugin.
    PolicyBackend(policy): a backend answering with ``policy(prompt)``, counting batched calls (for
        interactive benchmarks).
"""

from __future__ import annotations

from autorl.testing.checks import (
    PolicyBackend,
    assert_plugin_discovered,
    check_agent_view,
    check_benchmark_end_to_end,
    check_claims_score_zero,
    check_hardening,
    check_hidden_items_secret,
    check_train_data_holds_no_hidden_item,
    prepare_as_a_run,
)
from autorl.testing.fixtures import LocalGrader, autorl_home, autorl_pm, local_grader, register_plugin, tiny_model

__all__ = [
    "LocalGrader",
    "PolicyBackend",
    "assert_plugin_discovered",
    "autorl_home",
    "autorl_pm",
    "check_agent_view",
    "check_benchmark_end_to_end",
    "check_claims_score_zero",
    "check_hardening",
    "check_hidden_items_secret",
    "check_train_data_holds_no_hidden_item",
    "local_grader",
    "prepare_as_a_run",
    "register_plugin",
    "tiny_model",
]
