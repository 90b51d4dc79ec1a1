"""Inference backends: batched generation over a model directory."""
