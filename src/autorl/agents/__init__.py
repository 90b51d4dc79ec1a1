"""Agents: the untrusted processes that post-train the model."""
