"""Options the chosen engine cannot honour: refused before anything runs, never silently replaced.

``--model``, ``--contract`` and ``--backend`` are promises to the user about what is checked. An
engine that declares (``EngineCapabilities``) it cannot run the model, the contract or the
backend's framework asked for would otherwise have each scenario fitted to what it does support
(a green run of something other than what was asked) or fail to build (a false ``capture``
divergence): :func:`check_honoured` raises :class:`OptionNotHonoured` naming the option instead.
"""

from __future__ import annotations

from typing import Any

from graphcheck.capabilities import EngineCapabilities
from graphcheck.display import one_line
from graphcheck.errors import InputError


class OptionNotHonoured(InputError):
    """An option the chosen engine declares it cannot honour (exit 2, naming the option)."""


def frameworks_of(capabilities: EngineCapabilities) -> tuple[str, ...]:
    """The frameworks an engine runs on: torch alone when it captures with ``torch.cuda`` itself."""
    return ("torch",) if capabilities.graph_api == "torch.cuda" else capabilities.frameworks


def check_honoured(spec: str, capabilities: EngineCapabilities, setup: Any, backend: Any) -> None:
    """Raise :class:`OptionNotHonoured` when ``setup``'s model or contract, or ``backend``'s framework,
    is one the engine ``spec`` does not declare."""
    engine = one_line(spec)
    for option, asked, allowed in (
        ("--model", getattr(setup, "model", None), capabilities.models),
        ("--contract", getattr(setup, "contract", None), capabilities.contracts),
    ):
        if asked is not None and asked not in allowed:
            raise OptionNotHonoured(
                f"{option} {one_line(asked)}: engine {engine} cannot run it (it declares {', '.join(allowed)})"
            )
    framework = getattr(backend, "framework", None)
    frameworks = frameworks_of(capabilities)
    if framework is not None and framework not in frameworks:
        raise OptionNotHonoured(
            f"--backend {one_line(getattr(backend, 'name', '?'))}: engine {engine} runs on {', '.join(frameworks)} "
            f"backends, not on {framework}"
        )


__all__ = ["OptionNotHonoured", "check_honoured", "frameworks_of"]
