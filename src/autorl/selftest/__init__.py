"""``autorl selftest``: the shipped red team (``selftest/agent``, package data) against this install, through a real
``autorl run``.

    run          the scratch home, the canaries, the listeners and the model API of its own; the run; the verdicts
    canaries     the scratch operator's home and the probes derived from the run's policy
    judge        the verdicts: the red team's evidence weighed against what only this side sees
    upstream     the model API the run's gateway reaches
    scorer_code  the probe run as third-party scorer code
"""

from __future__ import annotations

from autorl.selftest.judge import NA, THROUGH, Verdict
from autorl.selftest.run import AGENT_DIR, run_selftest

__all__ = ["AGENT_DIR", "NA", "THROUGH", "Verdict", "run_selftest"]
