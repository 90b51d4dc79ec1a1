"""Plugins: the one loader (built-ins, plugin source folders, the ``autorl`` entry-point group) and the registry
of what they register (typed accessors, names resolved at entry points only, did-you-mean).

    loader    the plugin manager: which plugins load, in which order, with which warnings
    registry  benchmarks, agents and backends by name; ``--task ./folder`` and ``--agent ./folder``
"""
