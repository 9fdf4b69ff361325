"""Finding diverging scenarios: fuzzing suites with Hypothesis, built on ``graphcheck.check``.

``fuzz`` (a fixed-count search per suite, shrinking what it finds), ``timed_search``
(a time-budgeted one, for the catalog), ``database`` (the example database),
``suite_registry`` (finds the suites by name) and ``builtin`` (the built-in scenarios).
"""
