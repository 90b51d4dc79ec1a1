"""The AlpacaEval benchmark plugin for autorl."""
