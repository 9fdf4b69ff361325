"""graphcheck: finds device-graph capture bugs in speculative (MTP) decoding engines."""

__version__ = "0.1.0"
