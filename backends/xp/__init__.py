"""Array facade: one small API the engine's kernels are written against.

``make_ops(framework, device)`` returns the implementation; only ``torch`` exists
today (PaddlePaddle comes later and must fit ``ArrayOps`` without changing kernels).
"""

from __future__ import annotations

from backends.xp.base import ArrayOps


def make_ops(framework: str = "torch", device: str = "cpu") -> ArrayOps:
    if framework == "torch":
        from backends.xp.torch_xp import TorchArrayOps

        return TorchArrayOps(device)
    raise ValueError(f"no array facade for framework {framework!r} (have: torch)")


__all__ = ["ArrayOps", "make_ops"]
