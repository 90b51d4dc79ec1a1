"""Exports of autorl tasks to other harnesses (``autorl export``): :mod:`autorl.export.harbor` writes Harbor task
directories whose verifier, :mod:`autorl.export.verifier`, scores the agent's final checkpoint with autorl's grader."""
