"""One error hierarchy: every exception graphcheck raises on purpose is a GraphcheckError, and one table
(``graphcheck.cli.exitcodes.EXITS``) gives each family its exit code."""

from __future__ import annotations

import pytest

import graphcheck
from graphcheck import cli
from graphcheck.backends.engine.faults import UnknownFault, check_faults
from graphcheck.backends.engine.restore import EngineNotRestorable
from graphcheck.capture.base import CaptureError, EscapedOpError, HostSyncInCapture, PoisonedTensorError
from graphcheck.capture.devices import BackendError, BackendUnavailable, UnknownBackend
from graphcheck.capture.npu import NpuUnavailable
from graphcheck.check.checker import ScenarioDiverged
from graphcheck.check.oracles import OracleError
from graphcheck.check.records import EngineOutOfMemory
from graphcheck.cli import exitcodes
from graphcheck.cli.exitcodes import exit_for
from graphcheck.errors import (
    BackendUnavailableError,
    DivergenceError,
    EngineError,
    GraphcheckError,
    InputError,
    ResourceError,
)
from graphcheck.scenario import ScenarioError

from _modules import import_all

#: Public exceptions deliberately outside GraphcheckError, each with its reason. None today:
#: ScenarioDiverged is a DivergenceError as well as the AssertionError Hypothesis and pytest need.
#: (BaseException subclasses, such as the private control-flow exceptions of graphcheck.search
#: and the KeyboardInterrupts SearchInterrupted and RunInterrupted, are not Exceptions: not checked.)
OUTSIDE_THE_HIERARCHY: dict[str, str] = {}


def _public_exceptions() -> dict[str, type]:
    modules, _skipped = import_all()
    return {
        f"{name}.{attr}": value
        for name, module in modules.items()
        for attr, value in vars(module).items()
        if isinstance(value, type)
        and issubclass(value, Exception)
        and value.__module__ == name  # defined there, not imported
        and not attr.startswith("_")
    }


def test_every_public_exception_is_a_graphcheck_error() -> None:
    found = _public_exceptions()
    assert len(found) >= 15 and "graphcheck.capture.devices.BackendUnavailable" in found, sorted(found)
    outside = sorted(n for n, cls in found.items() if not issubclass(cls, GraphcheckError))
    assert outside == sorted(OUTSIDE_THE_HIERARCHY), (
        f"derive these from graphcheck.errors.GraphcheckError (or one of its families): {outside}"
    )


def test_the_walk_skips_only_modules_of_missing_optional_frameworks() -> None:
    modules, skipped = import_all()
    assert "graphcheck.cli.exitcodes" in modules and "graphcheck.reference.decoder" in modules
    assert all(
        missing.split(".")[0] in ("torch", "paddle", "torch_npu", "redis", "vllm") for missing in skipped.values()
    )


@pytest.mark.parametrize(
    "error, family",
    [
        (ScenarioError, InputError),
        (OracleError, InputError),
        (UnknownBackend, InputError),
        (UnknownFault, InputError),
        (BackendUnavailable, BackendUnavailableError),
        (NpuUnavailable, BackendUnavailableError),
        (EngineOutOfMemory, ResourceError),
        (CaptureError, EngineError),
        (HostSyncInCapture, CaptureError),
        (EscapedOpError, CaptureError),
        (PoisonedTensorError, EngineError),
        (EngineNotRestorable, EngineError),
        (ScenarioDiverged, DivergenceError),
        (BackendError, GraphcheckError),
    ],
)
def test_each_error_is_in_its_family(error: type, family: type) -> None:
    assert issubclass(error, family) and issubclass(family, GraphcheckError)


@pytest.mark.parametrize(
    "error, builtin",
    [
        (ScenarioError, ValueError),
        (OracleError, ValueError),
        (UnknownBackend, ValueError),
        (UnknownFault, ValueError),
        (CaptureError, RuntimeError),
        (PoisonedTensorError, RuntimeError),
        (EngineNotRestorable, RuntimeError),
        (NpuUnavailable, RuntimeError),
        (ScenarioDiverged, AssertionError),
    ],
)
def test_the_old_builtin_bases_stay(error: type, builtin: type) -> None:
    """Code that caught ``except ValueError`` (or RuntimeError, AssertionError) catches them still."""
    assert issubclass(error, builtin)


def test_except_backend_unavailable_error_catches_what_resolve_raises(monkeypatch: pytest.MonkeyPatch) -> None:
    try:
        import torch
    except ImportError:
        pass  # resolve("cuda") then says torch is missing: BackendUnavailable too
    else:
        monkeypatch.setattr(torch.cuda, "is_available", lambda: False)  # this machine has no GPU; be sure
    try:
        graphcheck.resolve("cuda")
    except graphcheck.BackendUnavailableError as err:
        assert "--emulate" in str(err) or "PyTorch" in str(err)
    else:
        pytest.fail("resolve('cuda') without a GPU must raise")
    assert graphcheck.BackendUnavailableError is BackendUnavailableError


def test_an_unknown_backend_or_fault_is_an_input_error() -> None:
    with pytest.raises(graphcheck.InputError, match="unknown backend"):
        graphcheck.resolve("tpu")
    with pytest.raises(graphcheck.InputError, match="unknown fault"):
        check_faults(["no-such-fault"])


@pytest.mark.parametrize(
    "error, code",
    [
        (InputError, exitcodes.USAGE),
        (ScenarioError, exitcodes.USAGE),
        (OracleError, exitcodes.USAGE),
        (UnknownBackend, exitcodes.USAGE),
        (UnknownFault, exitcodes.USAGE),
        (ResourceError, exitcodes.USAGE),
        (EngineOutOfMemory, exitcodes.USAGE),
        (BackendUnavailableError, exitcodes.BACKEND_UNAVAILABLE),
        (BackendUnavailable, exitcodes.BACKEND_UNAVAILABLE),
        (NpuUnavailable, exitcodes.BACKEND_UNAVAILABLE),
        (DivergenceError, exitcodes.DIVERGENCE),
        (ScenarioDiverged, exitcodes.DIVERGENCE),
        (KeyboardInterrupt, exitcodes.INTERRUPTED),
    ],
)
def test_the_exit_code_table_maps_each_family(error: type[BaseException], code: int) -> None:
    ending = exit_for(error)
    assert ending is not None and ending.code == code


@pytest.mark.parametrize(
    "error",
    [GraphcheckError, BackendError, EngineError, CaptureError, HostSyncInCapture, EngineNotRestorable, ValueError],
)
def test_what_is_not_a_user_error_keeps_its_traceback(error: type[BaseException]) -> None:
    assert exit_for(error) is None


def test_documented_codes() -> None:
    codes = (exitcodes.CLEAN, exitcodes.DIVERGENCE, exitcodes.USAGE, exitcodes.BACKEND_UNAVAILABLE)
    assert codes == (0, 1, 2, 3) and exitcodes.INTERRUPTED == 130


def test_a_subclass_takes_its_parents_entry() -> None:
    class MyInputError(InputError):
        pass

    class MyScenarioError(ScenarioError):
        pass

    class MyCaptureError(CaptureError):
        pass

    assert exit_for(MyInputError) is exitcodes.EXITS[InputError]
    assert exit_for(MyScenarioError("requests", "bad")) is exitcodes.EXITS[ScenarioError]
    assert exit_for(MyCaptureError) is None
    assert exit_for(ScenarioError) is not exit_for(InputError)  # its own line: "bad scenario: ..."


@pytest.mark.parametrize(
    "error, code, line",
    [
        (InputError("--steps must be in [1, 10000]"), 2, "graphcheck: error: --steps must be in [1, 10000]"),
        (
            ScenarioError("requests[0].top_p", "out of range"),
            2,
            "graphcheck: bad scenario: requests[0].top_p: out of range",
        ),
        (UnknownFault("unknown fault(s) x"), 2, "graphcheck: error: unknown fault(s) x"),
        (EngineOutOfMemory("out of memory in step 3"), 2, "graphcheck: out of memory in step 3"),
        (BackendUnavailable("no GPU"), 3, "graphcheck: backend unavailable: no GPU"),
        (KeyboardInterrupt(), 130, "graphcheck: interrupted"),
    ],
)
def test_main_ends_by_the_table(
    error: BaseException, code: int, line: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    def raise_it(args: object) -> int:
        raise error

    monkeypatch.setattr(cli, "_dispatch", raise_it)
    assert cli.main(["doctor"]) == code
    assert capsys.readouterr().err == line + "\n"


def test_main_lets_an_engine_error_through(monkeypatch: pytest.MonkeyPatch) -> None:
    def raise_it(args: object) -> int:
        raise HostSyncInCapture("host sync '.item()' inside graph capture")

    monkeypatch.setattr(cli, "_dispatch", raise_it)
    with pytest.raises(HostSyncInCapture):
        cli.main(["doctor"])
