"""``graphcheck run -j N``: the search spread over pytest-xdist workers, merged into one result.

``run`` (plans the jobs, runs pytest, merges), ``jobs`` (what a worker runs and
sends back), ``xdist_plugin`` and ``xdist_jobs`` (the pytest plugin and test module
handed to the workers).
"""
