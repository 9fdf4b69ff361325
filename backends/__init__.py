"""The MTP decoding engine, its array facade and the device graph runners.

Nothing here imports torch or paddle at import time; see ``graphcheck.backends.devices``
for choosing a backend.
"""
