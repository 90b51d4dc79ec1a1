"""Evaluators, statistics and the one evaluation path shared by baselines and submissions."""
