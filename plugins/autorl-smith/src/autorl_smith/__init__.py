"""The smith benchmark plugin for autorl."""
