"""Documented exit codes of the graphcheck command line."""

CLEAN = 0  #: every check agreed
DIVERGENCE = 1  #: at least one divergence between eager, graph and reference
USAGE = 2  #: bad command line or bad input (a malformed scenario file, say)
BACKEND_UNAVAILABLE = 3  #: the backend's framework or device is missing
INTERRUPTED = 130  #: stopped by Ctrl-C (SIGINT); what was found so far is in the report
