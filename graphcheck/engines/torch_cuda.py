"""``--engine builtin-torch-cuda``: the built-in engine as an engine that captures with ``torch.cuda`` itself.

Real engines call ``torch.cuda.CUDAGraph`` / ``torch.cuda.graph`` directly rather
than a graph runner of graphcheck's. This adapter gives the built-in engine that
shape (its graphs go through
:class:`~graphcheck.capture.torch_cuda_api.TorchCudaApiRunner`) and
declares ``graph_api="torch.cuda"``, so graphcheck treats it as it treats such an
engine: on the ``cpu`` backend every run happens inside
``graphcheck.emulate.cuda_graphs()`` (the op-level emulator), on ``cuda`` the
graphs are real and their static inputs come from the capture observer. Every
fault of the built-in engine is available, so ``graphcheck catalog --engine
builtin-torch-cuda`` measures that path against the whole fault list.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from graphcheck.backends.engine import Engine as BuiltinEngine


def _torch_cuda_runner() -> Any:
    from graphcheck.capture.torch_cuda_api import TorchCudaApiRunner

    return TorchCudaApiRunner()


class Engine(BuiltinEngine):
    """The built-in engine, its graphs captured with ``torch.cuda.graph``."""

    capabilities = dataclasses.replace(BuiltinEngine.capabilities, graph_api="torch.cuda")

    def __init__(self, config: Any, weights: Any, *, device: Any, use_graphs: bool, faults: Any) -> None:
        if device.framework != "torch":
            raise ValueError(f"builtin-torch-cuda runs on torch backends (cpu, cuda), not {device.name}")
        device = dataclasses.replace(device, runner_factory=_torch_cuda_runner, trace_runner_factory=None)
        super().__init__(config, weights, device=device, use_graphs=use_graphs, faults=faults)
