"""Backend names -> (framework, device, graph runner).

``resolve("cuda")`` gives torch on the GPU with CUDA graphs; ``--emulate``
(``emulate=True``) gives the same backend's framework path on the CPU with the
emulated graph runner, for machines without the hardware. ``cpu`` is always
torch on the CPU with the emulated runner. ``xpu`` is PaddlePaddle on a Kunlun
XPU place with Paddle's CUDAGraph runner; with ``--emulate`` it is Paddle on the CPU
with that same runner driving the emulated XPU graph API
(``graphcheck.capture.xpu_emulated``), reported as ``xpu-emulated``. ``npu`` is torch with
torch_npu on an Ascend NPU and the ``NPUGraph`` runner (``graphcheck.capture.npu``);
with ``--emulate`` it is torch on the CPU with that same runner driving the
emulated NPU device module (``graphcheck.capture.npu_emulated``), so the runner's
pool, task groups and update hook run too; reports name it ``npu-emulated``.

User errors (an unknown name, a missing framework or device) raise
:class:`UnknownBackend` (an ``InputError``) or :class:`BackendUnavailable` (a
``BackendUnavailableError``), both :class:`BackendError`: their message is the
whole story, for the CLI to print without a traceback. Frameworks are imported only when a backend needs them
(paddle only for ``xpu`` and by :func:`available_backends`). torch_npu is
imported only by ``resolve("npu")`` (through ``graphcheck.capture.npu.load_npu_binding``)
and by :func:`available_backends` when the Ascend toolkit is present: installing
it without the toolkit breaks ``import torch``, so doctor then reads only its
package metadata and the ``/dev/davinci*`` device nodes.
"""

from __future__ import annotations

import dataclasses
import glob
import importlib.metadata
import importlib.util
import os
import warnings
from dataclasses import dataclass
from typing import Any, Callable

from graphcheck.errors import BackendUnavailableError, GraphcheckError, InputError

from .base import GraphRunner

BACKENDS = ("cpu", "cuda", "npu", "xpu")
#: Graph emulators for the torch CPU backends (``--emulator``): the kernel-level
#: ``EmulatedRunner`` (default) or the op-level ``OpGraphRunner`` (torch only).
EMULATORS = ("kernel", "ops")


class BackendError(GraphcheckError):
    """A backend cannot be used as asked; the message says why and what to do."""


class UnknownBackend(BackendError, InputError, ValueError):
    """No backend has that name (bad input: an ``InputError``, and a ``ValueError`` as before)."""


class UnsupportedEmulator(BackendError, InputError, ValueError):
    """``--emulator`` names no emulator, or one the backend cannot run on (bad input: an ``InputError``)."""


class BackendUnavailable(BackendError, BackendUnavailableError):
    """The backend exists but this machine lacks its framework, device or implementation.

    A ``graphcheck.BackendUnavailableError``: ``except graphcheck.BackendUnavailableError``
    catches what ``graphcheck.resolve`` raises.
    """


@dataclass(frozen=True)
class Device:
    """A resolved backend: where tensors live and which runner captures graphs."""

    name: str  # the backend name asked for ("cpu", "cuda", ...)
    framework: str  # "torch" | "paddle"
    device: str  # framework device string: "cpu", "cuda", ...
    runner_factory: Callable[[], GraphRunner]
    description: str  # one line for reports: framework, version, device, runner
    emulated: bool = False
    #: A runner whose graphs replay kernel by kernel, for a kernel trace (None: ``runner_factory``'s
    #: graphs already do, or the device cannot, and a trace sees each replay as one call).
    trace_runner_factory: Callable[[], GraphRunner] | None = None
    #: The CPU graph emulator (one of :data:`EMULATORS`): "ops" runs graphs on ``OpGraphRunner``.
    emulator: str = "kernel"

    @property
    def op_level(self) -> bool:
        """Whether graphs are recorded op by op (a kernel trace then names aten ops, not kernels)."""
        return self.emulator == "ops"

    def for_tracing(self) -> Device:
        """This device with the runner a kernel trace needs (``graphcheck.check.localise``)."""
        if self.trace_runner_factory is None:
            return self
        return dataclasses.replace(self, runner_factory=self.trace_runner_factory)

    def device_error(self) -> str | None:
        """After an engine exception: the device's sticky error, or None while it still works.

        A device-side assert or an illegal access poisons the framework's
        context for the whole process: every later kernel fails with it. A tiny
        round trip through the device tells whether that happened. Emulated and
        CPU backends never lose their device.
        """
        if self.emulated or self.device == "cpu":
            return None
        try:
            if self.framework == "paddle":
                import paddle

                paddle.ones([1]).numpy()
            else:
                import torch

                torch.ones(1, device=self.device).sum().cpu()
        except Exception as exc:  # the sticky error itself
            return f"{type(exc).__name__}: {exc}".strip()
        return None


@dataclass(frozen=True)
class BackendStatus:
    """What ``graphcheck doctor`` shows for one backend."""

    name: str
    framework: str  # the framework package the backend needs
    framework_version: str | None  # None: not installed
    device_present: bool | None  # None: not checked (checking would need an unsafe import)
    runner: str  # the graph runner it uses on real hardware
    emulate: str | None  # what --emulate would use, None when there is no emulation
    usable: bool  # resolve(name) would succeed here
    note: str


def _version(*dists: str) -> str | None:
    for dist in dists:
        try:
            return importlib.metadata.version(dist)
        except importlib.metadata.PackageNotFoundError:
            continue
    return None


def _load_torch(backend: str) -> Any:
    if importlib.util.find_spec("torch") is None:
        raise BackendUnavailable(f"backend '{backend}' needs PyTorch, which is not installed here (pip install torch)")
    try:
        import torch
    except Exception as exc:  # e.g. a torch_npu install without the Ascend toolkit
        raise BackendUnavailable(f"backend '{backend}' needs PyTorch, but 'import torch' failed: {exc}") from exc
    return torch


def _emulated_runner() -> GraphRunner:
    from .emulated import EmulatedRunner

    return EmulatedRunner()


def _op_runner() -> GraphRunner:
    from .op_graphs import OpGraphRunner

    return OpGraphRunner()


def _cuda_runner() -> GraphRunner:
    from .cuda import CudaGraphRunner

    return CudaGraphRunner()


def _cuda_trace_runner() -> GraphRunner:
    from .cuda import CudaGraphRunner

    return CudaGraphRunner(per_kernel=True)


def _torch_cpu(name: str, what: str, emulator: str = "kernel") -> Device:
    torch = _load_torch(name)
    ops = emulator == "ops"
    runner = "op-level emulated graph runner (emulated-ops)" if ops else "emulated graph runner"
    return Device(
        name=name,
        framework="torch",
        device="cpu",
        runner_factory=_op_runner if ops else _emulated_runner,
        description=f"{what}: torch {torch.__version__} on cpu, {runner}",
        emulated=True,
        emulator=emulator,
    )


PADDLE_PIP = "pip install paddlepaddle==3.3.1"  # the CPU build from PyPI (paddlepaddle-xpu is not on PyPI)
_PADDLE_DISTS = ("paddlepaddle-xpu", "paddlepaddle-gpu", "paddlepaddle")


def _load_paddle(backend: str) -> Any:
    if importlib.util.find_spec("paddle") is None:
        raise BackendUnavailable(
            f"backend '{backend}' needs PaddlePaddle, which is not installed here ({PADDLE_PIP} for the CPU "
            "build that --emulate uses; a Kunlun XPU needs paddlepaddle-xpu from Paddle's own index)"
        )
    try:
        with warnings.catch_warnings():  # paddle warns about ccache on import
            warnings.simplefilter("ignore")
            import paddle
    except Exception as exc:
        raise BackendUnavailable(f"backend '{backend}' needs PaddlePaddle, but 'import paddle' failed: {exc}") from exc
    return paddle


def _xpu_count(paddle: Any) -> int:
    """Kunlun XPUs paddle can use: 0 on a build without XPU support."""
    if not paddle.device.is_compiled_with_xpu():
        return 0
    try:
        return int(paddle.device.xpu.device_count())
    except Exception:
        return 0


def _no_xpu_reason(paddle: Any) -> str:
    if not paddle.device.is_compiled_with_xpu():
        return (
            f"paddle {paddle.__version__} is a build without XPU support "
            "(paddle.device.is_compiled_with_xpu() is False)"
        )
    return f"paddle {paddle.__version__} (built with XPU support) sees no XPU device (device_count() is 0)"


def _xpu_emulated_runner() -> GraphRunner:
    """The xpu runner over a fresh emulated XPU graph API; one warm-up run (on the CPU it only costs time)."""
    from .xpu import XpuGraphRunner
    from .xpu_emulated import emulated_xpu_binding

    return XpuGraphRunner(emulated_xpu_binding(), warmup_iters=1)


def _xpu_runner_for(device: str) -> Callable[[], GraphRunner]:
    def factory() -> GraphRunner:
        from .xpu import XpuGraphRunner, load_xpu_binding

        return XpuGraphRunner(load_xpu_binding(device))

    return factory


#: What doctor says ``--backend xpu --emulate`` runs, and what that does not prove.
XPU_EMULATE = "paddle on cpu, xpu runner on the emulated XPU graph API"
_XPU_EMULATE_PROVES = (
    "--emulate works: it runs the xpu runner's capture and replay code on paddle CPU tensors "
    "(its wiring and graph semantics, not Kunlun kernels, the XPU memory pool or thread_local mode)"
)


def _resolve_xpu(emulate: bool) -> Device:
    paddle = _load_paddle("xpu")
    if emulate:
        return Device(
            name="xpu",
            framework="paddle",
            device="cpu",
            runner_factory=_xpu_emulated_runner,
            description=(
                f"xpu --emulate: paddle {paddle.__version__} on cpu, xpu CUDAGraph runner on the emulated XPU graph API"
            ),
            emulated=True,
        )
    if _xpu_count(paddle) == 0:
        raise BackendUnavailable(
            f"backend 'xpu' needs a Kunlun XPU, but {_no_xpu_reason(paddle)}. "
            "Pass --emulate to run the xpu backend's paddle path and graph runner on the CPU "
            "with the emulated XPU graph API."
        )
    current = str(paddle.device.get_device())
    device = current if current.startswith("xpu:") else "xpu:0"
    return Device(
        name="xpu",
        framework="paddle",
        device=device,
        runner_factory=_xpu_runner_for(device),
        description=f"xpu: paddle {paddle.__version__} on {device}, paddle CUDAGraph runner on an XPU place",
    )


def _xpu_status() -> BackendStatus:
    version = _version(*_PADDLE_DISTS)
    emulate = XPU_EMULATE
    if version is None:
        return BackendStatus(
            "xpu",
            "paddle",
            None,
            None,
            "xpu",
            emulate,
            False,
            f"PaddlePaddle is not installed ({PADDLE_PIP}; --emulate needs it too)",
        )
    try:
        paddle = _load_paddle("xpu")
    except BackendUnavailable as exc:
        return BackendStatus("xpu", "paddle", version, None, "xpu", emulate, False, str(exc))
    count = _xpu_count(paddle)
    note = (
        f"{count} Kunlun XPU device(s); paddle CUDAGraph on an XPU place"
        if count
        else f"{_no_xpu_reason(paddle)}; {_XPU_EMULATE_PROVES}"
    )
    return BackendStatus("xpu", "paddle", paddle.__version__, count > 0, "xpu", emulate, count > 0, note)


NPU_EMULATE = "torch on cpu, npu runner on the emulated NPU module"
_NPU_EMULATE_HINT = (
    "Pass --emulate to run the npu backend's torch path and NPUGraph runner on the CPU "
    "with the emulated NPU device module."
)


def _npu_binding() -> Any:
    """torch_npu's binding through the seam in graphcheck.capture.npu, or BackendUnavailable."""
    from . import npu

    try:
        return npu.load_npu_binding()
    except npu.NpuUnavailable as exc:
        raise BackendUnavailable(
            f"backend 'npu' needs torch_npu and the Ascend CANN toolkit: {exc}. {_NPU_EMULATE_HINT}"
        ) from exc


def _npu_runner_for(binding: Any) -> Callable[[], GraphRunner]:
    def factory() -> GraphRunner:
        from .npu import NpuGraphRunner

        return NpuGraphRunner(binding)

    return factory


def _npu_emulated_runner() -> GraphRunner:
    """The npu runner over a fresh emulated NPU module; one warm-up run (on the CPU it only costs time)."""
    from .npu import NpuGraphRunner
    from .npu_emulated import emulated_npu_binding

    return NpuGraphRunner(emulated_npu_binding(), warmup_iters=1)


def _resolve_npu(emulate: bool) -> Device:
    torch = _load_torch("npu")
    if emulate:
        return Device(
            name="npu",
            framework="torch",
            device="cpu",
            runner_factory=_npu_emulated_runner,
            description=(
                f"npu --emulate: torch {torch.__version__} on cpu, npu NPUGraph runner "
                "on the emulated NPU device module"
            ),
            emulated=True,
        )
    binding = _npu_binding()
    if binding.module.device_count() == 0:
        raise BackendUnavailable(
            f"backend 'npu' needs an Ascend NPU, but {binding.source} sees none "
            f"(torch.npu.device_count() is 0). {_NPU_EMULATE_HINT}"
        )
    return Device(
        name="npu",
        framework="torch",
        device=binding.device,
        runner_factory=_npu_runner_for(binding),
        description=f"npu: torch {torch.__version__}, {binding.source} on {binding.device}, NPUGraph runner",
    )


def _ascend_toolkit() -> str | None:
    """The Ascend CANN toolkit folder, if one is set up (without it torch_npu cannot import)."""
    for var in ("ASCEND_TOOLKIT_HOME", "ASCEND_HOME_PATH"):
        if os.environ.get(var) and os.path.isdir(os.environ[var]):
            return os.environ[var]
    default = "/usr/local/Ascend/ascend-toolkit/latest"
    return default if os.path.isdir(default) else None


def _davinci_nodes() -> list[str]:
    """Ascend device nodes (/dev/davinci0, ...): present only with the NPU driver and a device."""
    return sorted(p for p in glob.glob("/dev/davinci*") if p.removeprefix("/dev/davinci").isdigit())


def _npu_status() -> BackendStatus:
    version = _version("torch-npu", "torch_npu")
    nodes = _davinci_nodes()
    seen = f"{len(nodes)} Ascend device node(s) ({', '.join(nodes)})" if nodes else "no Ascend device (/dev/davinci*)"

    def row(device: bool, usable: bool, note: str) -> BackendStatus:
        return BackendStatus("npu", "torch_npu", version, device, "npu", NPU_EMULATE, usable, note)

    if version is None and importlib.util.find_spec("torch_npu") is None:
        return row(bool(nodes), False, f"torch_npu is not installed; {seen}; --emulate works (needs torch)")
    if _ascend_toolkit() is None:
        return row(
            bool(nodes),
            False,
            f"torch_npu {version} is installed, but no Ascend CANN toolkit was found "
            "(ASCEND_TOOLKIT_HOME, /usr/local/Ascend): not imported, since the import would fail; "
            f"{seen}; --emulate works",
        )
    try:
        binding = _npu_binding()
        count = int(binding.module.device_count())
    except Exception as exc:  # BackendUnavailable, or a broken driver
        return row(bool(nodes), False, f"{exc}; {seen}")
    if count == 0:
        return row(False, False, f"{binding.source} sees no NPU (device_count() is 0); --emulate works")
    return row(True, True, f"{count} Ascend NPU(s) through {binding.source}; NPUGraph runner with task-group updates")


def _no_gpu_reason(torch: Any) -> str:
    build = "a CPU-only build" if torch.version.cuda is None else f"built for CUDA {torch.version.cuda}"
    return f"torch {torch.__version__} ({build}) sees no CUDA device (torch.cuda.is_available() is False)"


def choice_from_env(environ: Any = os.environ) -> tuple[str, bool]:
    """(backend name, emulate) from GRAPHCHECK_BACKEND (default cpu) and GRAPHCHECK_EMULATE (set, and not 0/false/no)."""
    emulate = environ.get("GRAPHCHECK_EMULATE", "").strip().lower() not in ("", "0", "false", "no")
    return environ.get("GRAPHCHECK_BACKEND", "cpu"), emulate


def check_emulator(key: str, emulate: bool, emulator: str) -> None:
    """Refuse an ``emulator`` that is unknown or that backend ``key`` cannot use (:class:`UnsupportedEmulator`)."""
    if emulator not in EMULATORS:
        raise UnsupportedEmulator(f"unknown emulator {emulator!r}; valid emulators: {', '.join(EMULATORS)}")
    if emulator == "kernel" or key == "cpu" or (key == "cuda" and emulate):
        return
    if key == "cuda":
        raise UnsupportedEmulator(
            "--emulator ops needs a CPU emulation: real cuda graphs have no emulator (add --emulate, or use --backend cpu)"
        )
    why = "paddle" if key == "xpu" else "the npu graph runner on the emulated NPU module"
    raise UnsupportedEmulator(
        f"--emulator ops cannot run backend {key!r}: op-level emulation records torch ops on the CPU, and {key} "
        f"{'--emulate ' if emulate else ''}runs {why} (use --backend cpu, or cuda --emulate)"
    )


def resolve(name: str, *, emulate: bool = False, emulator: str = "kernel") -> Device:
    """The backend called ``name``; with ``emulate``, its CPU emulation; ``emulator="ops"``: the torch CPU
    backends (cpu, cuda --emulate) on the op-level graph runner instead of the kernel-level one."""
    key = name.strip().lower()
    if key not in BACKENDS:
        raise UnknownBackend(f"unknown backend {name!r}; valid backends: {', '.join(BACKENDS)}")
    check_emulator(key, emulate, emulator)
    if key == "cpu":
        return _torch_cpu("cpu", "cpu", emulator)
    if key == "cuda":
        if emulate:
            return _torch_cpu("cuda", "cuda --emulate", emulator)
        torch = _load_torch("cuda")
        if not torch.cuda.is_available():
            raise BackendUnavailable(
                f"backend 'cuda' needs an NVIDIA GPU, but {_no_gpu_reason(torch)}. "
                "Pass --emulate to run the cuda backend's torch path on the CPU with the emulated graph runner."
            )
        index = torch.cuda.current_device()
        return Device(
            name="cuda",
            framework="torch",
            device="cuda",
            runner_factory=_cuda_runner,
            trace_runner_factory=_cuda_trace_runner,
            description=(
                f"cuda: torch {torch.__version__} on cuda:{index} ({torch.cuda.get_device_name(index)}), "
                "torch.cuda.CUDAGraph runner"
            ),
        )
    if key == "xpu":
        return _resolve_xpu(emulate)
    return _resolve_npu(emulate)


def available_backends() -> list[BackendStatus]:
    """The state of every backend on this machine (imports torch and paddle if installed; never torch_npu)."""
    torch_version = _version("torch")
    gpu: bool | None = None
    cuda_note = "torch is not installed"
    if torch_version is not None:
        try:
            torch = _load_torch("cuda")
            torch_version = torch.__version__
            gpu = bool(torch.cuda.is_available())
            cuda_note = (
                f"{torch.cuda.device_count()} CUDA device(s): {torch.cuda.get_device_name(0)}"
                if gpu
                else _no_gpu_reason(torch) + "; --emulate works"
            )
        except BackendUnavailable as exc:
            cuda_note = str(exc)
    has_torch = torch_version is not None and gpu is not None
    return [
        BackendStatus(
            "cpu",
            "torch",
            torch_version,
            True,
            "emulated",
            None,
            has_torch,
            "torch on the CPU with the emulated graph runner" if has_torch else cuda_note,
        ),
        BackendStatus(
            "cuda", "torch", torch_version, gpu, "cuda", "torch on cpu, emulated runner", bool(gpu), cuda_note
        ),
        _npu_status(),
        _xpu_status(),
    ]
