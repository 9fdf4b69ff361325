"""``--engine hf-cb``: Hugging Face transformers' continuous batching, checked by graphcheck.

Install with ``pip install 'graphcheck[hf]'`` (transformers 5.23.0; 5.17 works
too). The adapter (:mod:`.engine`) drives one ``ContinuousBatchingManager`` per
engine in-process over a tiny random-weight model (:mod:`.model`); what it
supports, fuzzes and can break is in :mod:`.capabilities` and :mod:`.faults`;
the per-version differences are in :mod:`.versions`.
"""

from graphcheck.engines.hf_cb.engine import Engine
from graphcheck.engines.hf_cb.versions import installed

installed()  # --engine hf-cb without a supported transformers: one line naming what to install

__all__ = ["Engine"]
