"""The humaneval benchmark plugin for autorl."""
