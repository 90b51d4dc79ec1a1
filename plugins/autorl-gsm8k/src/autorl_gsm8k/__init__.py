"""The gsm8k benchmark plugin for autorl."""
