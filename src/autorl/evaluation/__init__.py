"""Evaluators, statistics and the one evaluation path shared by baselines and submissions.

run         the one evaluation path: a model's scores on a split, per item
generation  the generation evaluator (prompt -> completions -> the benchmark's score) and the choice of evaluator
episode     multi-turn episodes in an environment
identity    config and model hashes
stats       intervals and paired tests
checkpoint  ``autorl.evaluate``: one checkpoint exactly as the grader would score it
noise       the noise floor: one checkpoint scored N times
"""
