"""``graphcheck bench``: benchmarks/ under pytest-benchmark, summarised.

``run`` (runs pytest-benchmark, reads its JSON into a summary) and ``console``
(the summary's tables and verdict).
"""
