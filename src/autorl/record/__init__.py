"""A run's record, from its row to what people read.

results    the row (every ledger / ``results.csv`` column), the run's whole record and its derivations
ledger     the one writer: SQLite, ``result.json``, ``results.csv``
result_file  a ``result.json`` read back and checked to be a run's record
card       a run's ``card.md`` and ``trajectory.svg``, a study's ``card.md``
charts     the SVG figures, pure functions of plain data
timeline   a run's timeline as plain data: what charts draws
display    how a result reads on a screen: the p-value rule, a result in words, short ids
metrics    a run's process metrics from the grader's records
aggregate  runs pooled per agent
frames     ``autorl.runs()``: every recorded run as a typed pandas DataFrame, from the ledger of a home
db         SQLite as the ledger and the grader's store use it: one write transaction shape
"""
