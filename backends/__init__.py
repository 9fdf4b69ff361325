"""The built-in MTP decoding engine (``engine``) and its array facade (``xp``).

Just an engine: graphcheck reaches it through the adapter protocol like any other
(``--engine builtin``). The graph runners, emulators and backend resolution it captures
with are the harness's (``graphcheck.capture``); ``devices`` here only re-exports
``graphcheck.capture.devices`` under its former name. Nothing here imports torch or paddle
at import time.
"""

if __name__ != "graphcheck.backends":  # the checkout's backends/ folder, imported by its bare name
    raise ImportError(f"{__name__} is graphcheck.backends under another name: import graphcheck.backends instead")
