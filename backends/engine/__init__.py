"""The batched, padded, buffer-based MTP speculative decoding engine.

``Engine(config, weights, device="cpu", use_graphs=True)`` implements the
decoder protocol of ``graphcheck.driver`` (submit / abort / step) and matches
``reference/`` token for token; see ``engine.py`` for the graph policy.
"""

from graphcheck.backends.engine.buffers import EngineBuffers, allocate_buffers
from graphcheck.backends.engine.engine import BucketGraphs, Engine, StepInfo
from graphcheck.backends.engine.faults import FAULTS
from graphcheck.backends.engine.weights import EngineWeights

__all__ = ["BucketGraphs", "Engine", "EngineBuffers", "EngineWeights", "FAULTS", "StepInfo", "allocate_buffers"]
