"""Checking one scenario: the lockstep run of reference, eager engine and graph engine, and what it records.

``lockstep`` (drives the three decoders step by step), ``diff`` (compares them),
``records`` (what a run observed: ``CheckOutcome``), ``checker`` (``Checker``, the one
way a scenario is run, for every engine), ``engines`` (``--engine SPEC`` resolved),
``timings`` and ``threads``. Imports nothing
above it: no search, no command line, no reports.
"""
