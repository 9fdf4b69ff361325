"""The MTP decoding engine, its array facade and the device graph runners.

Nothing here imports torch or paddle at import time; see ``graphcheck.backends.devices``
for choosing a backend.
"""

if __name__ != "graphcheck.backends":  # the checkout's backends/ folder, imported by its bare name
    raise ImportError(f"{__name__} is graphcheck.backends under another name: import graphcheck.backends instead")
