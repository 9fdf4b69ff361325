"""A test engine whose bug needs an earlier scenario on the same engine pair (tests/test_history.py)."""

import dataclasses

from graphcheck.backends.engine import Engine
from graphcheck.capabilities import EngineCapabilities


class KeyMemo:
    """The built-in engine, plus a memo kept across reset(): per graph bucket, the batch size the first
    scenario that replayed it replayed it with. A later scenario that replays the bucket with a larger batch
    loses the tokens of the rows past that size (as a graph whose key left the batch size out would)."""

    capabilities = EngineCapabilities()

    def __init__(self, config, weights, *, device, use_graphs, faults):
        self.inner = Engine(config, weights, device=device, use_graphs=use_graphs, faults=faults)
        self.memo, self.seen = {}, {}

    def step(self, t, overrides):
        result = self.inner.step(t, overrides)
        info = self.inner.last_step_info
        if not info.used_graph:
            return result
        self.seen.setdefault(info.bucket, info.real_bsz)
        frozen = self.memo.get(info.bucket)
        if frozen is None or info.real_bsz <= frozen:
            return result
        slots = dict(info.slots)
        rows = tuple(
            dataclasses.replace(r, accept_tokens=()) if slots.get(r.request_id, 0) >= frozen else r
            for r in result.requests
        )
        return dataclasses.replace(result, requests=rows)

    def reset(self):
        self.inner.reset()
        for bucket, size in self.seen.items():
            self.memo.setdefault(bucket, size)

    def submit(self, spec):
        self.inner.submit(spec)

    def abort(self, request_id):
        self.inner.abort(request_id)

    @property
    def last_step_info(self):
        return self.inner.last_step_info

    @property
    def graphs(self):
        return self.inner.graphs

    @property
    def runner(self):
        return self.inner.runner

    @property
    def sizes(self):
        return self.inner.sizes

    def buffer_tensors(self):
        return self.inner.buffer_tensors()

    def memory_bytes(self):
        return self.inner.memory_bytes()

    def state_snapshot(self, *, during_step=False):
        return self.inner.state_snapshot(during_step=during_step)
