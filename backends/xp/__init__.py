"""Array facade: one small API the engine's kernels are written against.

``make_ops(framework, device)`` returns the implementation: ``torch`` or
``paddle`` (both fit ``ArrayOps`` without changing kernels). A framework is
imported only when its facade is asked for.
"""

from __future__ import annotations

import os

from graphcheck.backends.xp.base import ArrayOps
from graphcheck.capture.sites import add_machinery

# The facade is machinery between the engine's kernels and the framework: op sites and a crash's
# engine frame name the kernel's line that called it, not the facade's.
add_machinery(os.path.dirname(os.path.abspath(__file__)))


def make_ops(framework: str = "torch", device: str = "cpu") -> ArrayOps:
    if framework == "torch":
        from graphcheck.backends.xp.torch_xp import TorchArrayOps

        return TorchArrayOps(device)
    if framework == "paddle":
        from graphcheck.backends.xp.paddle_xp import PaddleArrayOps

        return PaddleArrayOps(device)
    raise ValueError(f"no array facade for framework {framework!r} (have: torch, paddle)")


__all__ = ["ArrayOps", "make_ops"]
