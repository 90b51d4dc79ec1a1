"""The alfworld benchmark plugin for autorl."""
