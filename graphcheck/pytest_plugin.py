"""graphcheck's pytest plugin: options and fixtures for writing your own lockstep properties.

pytest loads it through the ``pytest11`` entry point once graphcheck is
installed (``pip install graphcheck``, or ``-e`` in a checkout); without the
install, ``-p graphcheck.pytest_plugin`` loads it (the entry point carries that
same name, so giving both is harmless). ``-p no:graphcheck.pytest_plugin`` turns
it off.

Options:

* ``--graphcheck-backend cpu|cuda|npu|xpu``: the backend the fixtures run on;
  default ``$GRAPHCHECK_BACKEND``, else ``cpu`` (the variable ``suites/`` reads).
* ``--graphcheck-emulate``: run that backend's framework on the CPU with the
  emulated graph runner; default ``$GRAPHCHECK_EMULATE``.
* ``--graphcheck-emulator {kernel,ops}``: the CPU graph emulator of cpu and
  cuda --emulate (default kernel; ops: the op-level ``OpGraphRunner``).
* ``--graphcheck-engine SPEC``: the engine the fixtures check, as ``graphcheck run
  --engine`` names it (``builtin``, an entry point of ``graphcheck.engines``, or
  ``package.module:attribute``); default ``$GRAPHCHECK_ENGINE``, else ``builtin``.
  A SPEC that does not resolve is a usage error (pytest exit 4).
* ``--graphcheck-profile NAME``: load a Hypothesis profile before collection,
  like ``--hypothesis-profile``. ``ci``, ``dev`` and ``thorough`` are
  graphcheck's, registered as ``graphcheck-ci`` ... so that they never replace a
  profile of yours or Hypothesis's built-in ``ci``; any other NAME is a profile
  your project registered.

Fixtures (nothing runs until a test asks for one):

* ``graphcheck_backend`` (session): the resolved ``graphcheck.capture.devices.Device``. A
  backend this machine cannot run is an error, with the reason, in every test
  that asks for it, never a skip: a gate asked to check cuda must not pass on
  a machine without a GPU.
* ``graphcheck_engine_factory`` (module): the ``EngineFactory`` under test, the
  one ``--graphcheck-engine`` names (the built-in engine by default). Override it
  in a conftest.py or a test module (scope ``"module"`` or ``"session"``) to check
  your own engine without the option (docs/adapters.md).
* ``graphcheck_setup`` (session): the model, contract and oracle every scenario is
  checked with (``--graphcheck-model``, ``--graphcheck-contract``,
  ``--graphcheck-oracle``), a ``graphcheck.check.setup.CheckSetup``.
* ``graphcheck_lockstep`` (module): a ``graphcheck.check.checker.Checker`` of that
  backend, engine and setup; ``graphcheck_lockstep(scenario, faults=[...])`` returns
  the CheckOutcome, ``graphcheck_lockstep.build(scenario)`` the Lockstep to step
  yourself, ``.strategy(s)`` fits a strategy's scenarios to the engine's capabilities.
* ``graphcheck_check`` (module): ``graphcheck_check(scenario, faults=[...])``
  runs the scenario and raises ``ScenarioDiverged`` (an AssertionError, so
  Hypothesis shrinks it) naming the first divergence, with a replay command.

* ``graphcheck_cuda_graphs`` (function): the test runs inside
  ``graphcheck.emulate.cuda_graphs()``: ``torch.cuda.CUDAGraph``, ``torch.cuda.graph``,
  streams and ``synchronize`` are the op-level emulator's, on CPU tensors; the value is
  the stand-ins as one object shaped like ``torch.cuda``.

The lockstep fixtures are module-scoped because Hypothesis rejects function-scoped
fixtures in ``@given`` tests; all of them are stateless. Importing this module
imports neither torch, paddle nor Hypothesis.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Any, Callable, Iterator

import pytest

if TYPE_CHECKING:
    from graphcheck.adapter import EngineFactory
    from graphcheck.capture.devices import Device
    from graphcheck.check.checker import Checker
    from graphcheck.check.engines import EngineChoice
    from graphcheck.check.records import CheckOutcome

#: examples per test of graphcheck's Hypothesis profiles, the settings of its own test suite (tests/conftest.py);
#: ``graphcheck run --profile`` has its own, fewer (graphcheck.search.suite_run.RUN_PROFILE_EXAMPLES)
TEST_PROFILE_EXAMPLES = {"ci": 15, "dev": 40, "thorough": 400}
PROFILE_PREFIX = "graphcheck-"


def pytest_addoption(parser: pytest.Parser) -> None:
    from graphcheck.capture.devices import BACKENDS, EMULATORS
    from graphcheck.check.oracles import ORACLE_CHOICES
    from graphcheck.check.setup import MODEL_ALIASES
    from graphcheck.contract import CONTRACT_NAMES
    from graphcheck.scenario import MODELS

    group = parser.getgroup("graphcheck", "graphcheck: device-graph capture checks in lockstep")
    group.addoption(
        "--graphcheck-backend",
        choices=BACKENDS,
        default=None,
        metavar="NAME",
        help=f"backend of the graphcheck fixtures: {', '.join(BACKENDS)} (default $GRAPHCHECK_BACKEND, else cpu)",
    )
    group.addoption(
        "--graphcheck-emulate",
        action="store_true",
        default=None,
        help="run the backend's framework on the CPU with the emulated graph runner (default $GRAPHCHECK_EMULATE)",
    )
    group.addoption(
        "--graphcheck-emulator",
        choices=EMULATORS,
        default=None,
        help="the CPU graph emulator of cpu and cuda --emulate: kernel (default) or ops (op-level, torch only)",
    )
    group.addoption(
        "--graphcheck-model",
        choices=(*MODELS, *MODEL_ALIASES),
        default=None,
        help="the model every scenario runs with (default: each scenario's own; float = float32)",
    )
    group.addoption(
        "--graphcheck-contract",
        default=None,
        metavar="NAME",
        help=f"the decoding contract the engine follows: {', '.join(CONTRACT_NAMES)} (default: each scenario's own)",
    )
    group.addoption(
        "--graphcheck-oracle",
        choices=ORACLE_CHOICES,
        default=None,
        help="exact, model-agnostic, or auto (default: exact for the exact model)",
    )
    group.addoption(
        "--graphcheck-engine",
        default=None,
        metavar="SPEC",
        help="the engine of the graphcheck fixtures: builtin, a graphcheck.engines entry point or "
        "package.module:attribute (default $GRAPHCHECK_ENGINE, else builtin)",
    )
    group.addoption(
        "--graphcheck-hang-limit",
        default=None,
        metavar="SECONDS",
        help="bound every call into the engine: past it, a hang divergence (default $GRAPHCHECK_HANG_LIMIT, "
        "else unbounded in a test session)",
    )
    group.addoption(
        "--graphcheck-profile",
        default=None,
        metavar="NAME",
        help="load a Hypothesis profile: graphcheck's ci, dev, thorough, or one your project registered",
    )


def profile_settings(name: str) -> dict[str, Any]:
    """Settings of ``name`` in graphcheck's own test suite (tests/ and suites/ conftests register these).

    Every setting that Hypothesis changes by itself on a CI machine is given
    here, and the parent is Hypothesis's ``default`` profile rather than the
    profile loaded at the time, so a profile means the same with ``CI`` set or
    unset. ``ci`` is the pull-request gate's: derandomized (the same examples
    on every run), no example database, the reproduction blob printed.
    """
    from hypothesis import HealthCheck, settings

    if name == "ci":
        extra: dict[str, Any] = {"print_blob": True, "derandomize": True, "database": None}
    else:
        extra = {"print_blob": False, "derandomize": False}
    return dict(
        parent=settings.get_profile("default"),
        max_examples=TEST_PROFILE_EXAMPLES[name],
        deadline=None,
        suppress_health_check=[HealthCheck.too_slow],
        **extra,
    )


def register_profiles() -> None:
    """Register graphcheck's Hypothesis profiles as ``graphcheck-ci``, ``graphcheck-dev``, ``graphcheck-thorough``.

    Examples, deadline and health checks as in tests/conftest.py, without the
    explain phase: it re-runs a failing scenario under line tracing of the
    whole engine (about 45 s on a small CPU box) to list engine lines, where
    the divergence in the failure message already says what went wrong.
    """
    from hypothesis import Phase, settings

    phases = [p for p in Phase if p is not Phase.explain]
    for name in TEST_PROFILE_EXAMPLES:
        settings.register_profile(PROFILE_PREFIX + name, phases=phases, **profile_settings(name))


def profile_name(name: str) -> str:
    """The registered Hypothesis profile ``--graphcheck-profile NAME`` loads."""
    return PROFILE_PREFIX + name if name in TEST_PROFILE_EXAMPLES else name


ENGINE_ENV = "GRAPHCHECK_ENGINE"


def engine_spec(config: pytest.Config) -> str:
    """``--graphcheck-engine``, else $GRAPHCHECK_ENGINE, else ``builtin``."""
    import os

    return config.getoption("graphcheck_engine") or os.environ.get(ENGINE_ENV) or "builtin"


def pytest_configure(config: pytest.Config) -> None:
    _check_engine(config)
    _check_backend(config)
    _check_setup_and_limit(config)
    _watch_for_hangs(config)
    name = config.getoption("graphcheck_profile")
    if not name:
        return
    from hypothesis import settings
    from hypothesis.errors import InvalidArgument

    register_profiles()
    try:
        settings.load_profile(profile_name(name))
    except InvalidArgument:
        raise pytest.UsageError(
            f"--graphcheck-profile {name}: no Hypothesis profile of that name; graphcheck's are "
            f"{', '.join(TEST_PROFILE_EXAMPLES)}, others must be registered by your project first"
        ) from None


def _check_engine(config: pytest.Config) -> None:
    """A SPEC (``--graphcheck-engine`` or $GRAPHCHECK_ENGINE) that does not resolve is a usage error now,
    not a failure in every test."""
    import os

    given = config.getoption("graphcheck_engine")
    said = "--graphcheck-engine" if given is not None else f"${ENGINE_ENV}"
    spec = given if given is not None else os.environ.get(ENGINE_ENV)
    if spec is None:
        return
    from graphcheck.check.engines import resolve_engine
    from graphcheck.errors import GraphcheckError

    try:
        resolve_engine(spec)
    except GraphcheckError as exc:  # a bad SPEC, or an engine that aborted at import
        raise pytest.UsageError(str(exc).replace("--engine", said, 1)) from None


_WATCHING = pytest.StashKey[Any]()


def _watch_for_hangs(config: pytest.Config) -> None:
    """``--graphcheck-hang-limit`` (or $GRAPHCHECK_HANG_LIMIT): the session's engine calls are bounded by the
    watchdog (graphcheck.check.watchdog); a call past it is a ``hang`` divergence of the test that made it."""
    import os

    text = config.getoption("graphcheck_hang_limit", None) or os.environ.get("GRAPHCHECK_HANG_LIMIT")
    if not text:
        return
    from graphcheck.check.watchdog import parse_limit, watching

    try:
        limit = parse_limit(text)
    except ValueError as exc:
        raise pytest.UsageError(f"graphcheck: --graphcheck-hang-limit: {exc}") from None
    watch = watching(limit)
    watch.__enter__()
    config.stash[_WATCHING] = watch


def pytest_unconfigure(config: pytest.Config) -> None:
    watch = config.stash.get(_WATCHING, None)
    if watch is not None:
        watch.__exit__(None, None, None)


def _check_backend(config: pytest.Config) -> None:
    """An unknown backend name ($GRAPHCHECK_BACKEND too) or an emulator the backend cannot use is a usage
    error now (no framework is imported for it); a backend this machine lacks stays each test's error."""
    import os

    given = ("graphcheck_backend", "graphcheck_emulate", "graphcheck_emulator")
    if all(config.getoption(o, None) is None for o in given) and "GRAPHCHECK_BACKEND" not in os.environ:
        return
    from graphcheck.capture.devices import BACKENDS, UnsupportedEmulator, check_emulator

    name, emulate = backend_choice(config)
    key = name.strip().lower()
    if key not in BACKENDS:
        raise pytest.UsageError(
            f"graphcheck: unknown backend {name!r} ($GRAPHCHECK_BACKEND); valid: {', '.join(BACKENDS)}"
        )
    try:
        check_emulator(key, emulate, emulator_choice(config))
    except UnsupportedEmulator as exc:
        raise pytest.UsageError(f"graphcheck: --graphcheck-emulator: {exc}") from None


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Iterator[None]:
    """An engine that breaks the adapter protocol (a factory that returns None, a step that returns a dict)
    ends the session as the usage error it is (pytest's exit 4), not as a failing test (exit 1, which reads
    as a divergence)."""
    try:
        return (yield)
    except Exception as exc:
        engines = sys.modules.get("graphcheck.check.engines")
        if engines is not None and isinstance(exc, engines.EngineSpecError):
            pytest.exit(f"graphcheck: {exc}", returncode=pytest.ExitCode.USAGE_ERROR)
        raise


_SETUP_OPTIONS = ("graphcheck_model", "graphcheck_contract", "graphcheck_oracle")


def _check_setup_and_limit(config: pytest.Config) -> None:
    """A bad ``--graphcheck-contract``, a model the oracle cannot check, or a malformed
    ``$GRAPHCHECK_MAX_ENGINE_MEMORY`` is a usage error of the run (pytest's exit 4), found before any
    test, never a failure of every test that uses a fixture (exit 1, which reads as a divergence)."""
    from graphcheck.errors import InputError

    try:
        if any(config.getoption(o) is not None for o in _SETUP_OPTIONS):
            from graphcheck.check.setup import CheckSetup

            CheckSetup.parse(*(config.getoption(o) for o in _SETUP_OPTIONS))
        from graphcheck.check.memory_gate import engine_memory_limit

        engine_memory_limit()
    except InputError as exc:
        raise pytest.UsageError(f"graphcheck: {exc}") from None


def backend_choice(config: pytest.Config) -> tuple[str, bool]:
    """(backend name, emulate) from the options, else from GRAPHCHECK_BACKEND / GRAPHCHECK_EMULATE."""
    from graphcheck.capture.devices import choice_from_env

    env_name, env_emulate = choice_from_env()
    emulate = config.getoption("graphcheck_emulate")
    return config.getoption("graphcheck_backend") or env_name, env_emulate if emulate is None else bool(emulate)


def emulator_choice(config: pytest.Config) -> str:
    """``--graphcheck-emulator``, default the kernel-level emulator."""
    return config.getoption("graphcheck_emulator", None) or "kernel"


def pytest_report_header(config: pytest.Config) -> str | None:
    options = ("graphcheck_backend", "graphcheck_emulate", "graphcheck_profile", "graphcheck_engine")
    emulator = emulator_choice(config)
    if not any(config.getoption(o) for o in options) and emulator == "kernel":
        return None
    name, emulate = backend_choice(config)
    profile = config.getoption("graphcheck_profile")
    engine = config.getoption("graphcheck_engine")
    return (
        f"graphcheck: backend {name}{' --emulate' if emulate else ''}"
        + (f" --emulator {emulator}" if emulator != "kernel" else "")
        + (f", engine {engine}" if engine else "")
        + (f", hypothesis profile {profile_name(profile)}" if profile else "")
    )


@pytest.fixture(scope="session")
def graphcheck_backend(pytestconfig: pytest.Config) -> Device:
    """The backend the graphcheck fixtures run on (``--graphcheck-backend``, ``--graphcheck-emulate``)."""
    from graphcheck.capture.devices import BackendError, resolve

    name, emulate = backend_choice(pytestconfig)
    try:
        return resolve(name, emulate=emulate, emulator=emulator_choice(pytestconfig))
    except BackendError as exc:
        pytest.fail(f"graphcheck backend unavailable: {exc}", pytrace=False)


@pytest.fixture(scope="session")
def graphcheck_engine(pytestconfig: pytest.Config) -> EngineChoice:
    """The engine ``--graphcheck-engine`` (or $GRAPHCHECK_ENGINE) names: a resolved ``EngineChoice``."""
    from graphcheck.check.engines import resolve_engine
    from graphcheck.errors import InputError

    try:
        return resolve_engine(engine_spec(pytestconfig))
    except InputError as exc:
        pytest.fail(f"graphcheck: {exc}", pytrace=False)


@pytest.fixture(scope="module")
def graphcheck_engine_factory(graphcheck_engine: EngineChoice) -> EngineFactory:
    """The engine under test (``--graphcheck-engine``). Override this fixture to check your own adapter."""
    return graphcheck_engine.factory


@pytest.fixture(scope="session")
def graphcheck_setup(pytestconfig: pytest.Config) -> Any:
    """The model, contract and oracle of the run (``--graphcheck-model``, ``-contract``, ``-oracle``):
    a ``graphcheck.check.setup.CheckSetup``. Override it to fix them for your engine."""
    from graphcheck.check.setup import CheckSetup
    from graphcheck.errors import InputError

    options = ("graphcheck_model", "graphcheck_contract", "graphcheck_oracle")
    try:
        return CheckSetup.parse(*(pytestconfig.getoption(o) for o in options))
    except InputError as exc:
        pytest.fail(f"graphcheck: {exc}", pytrace=False)


@pytest.fixture(scope="module")
def graphcheck_lockstep(
    graphcheck_backend: Device,
    graphcheck_engine: EngineChoice,
    graphcheck_engine_factory: EngineFactory,
    graphcheck_setup: Any,
) -> Checker:
    """The Checker: ``graphcheck_lockstep(scenario, faults=())`` -> CheckOutcome; ``.build(scenario)`` -> Lockstep."""
    from graphcheck.check.checker import Checker
    from graphcheck.check.engines import engine_from_factory
    from graphcheck.errors import InputError

    try:
        engine = (
            graphcheck_engine
            if graphcheck_engine_factory is graphcheck_engine.factory
            else engine_from_factory(graphcheck_engine_factory)
        )
    except InputError as exc:
        pytest.fail(f"graphcheck: {exc}", pytrace=False)
    from graphcheck.check.honoured import OptionNotHonoured

    try:
        return Checker(graphcheck_backend, engine, graphcheck_setup)
    except OptionNotHonoured as exc:  # the run's options, not this test: a usage error of the session
        pytest.exit(f"graphcheck: {exc}", returncode=pytest.ExitCode.USAGE_ERROR)


@pytest.fixture(scope="module")
def graphcheck_check(graphcheck_lockstep: Checker) -> Callable[..., CheckOutcome]:
    """``graphcheck_check(scenario, faults=())``: the CheckOutcome, or ScenarioDiverged with the first divergence."""
    return graphcheck_lockstep.check


@pytest.fixture
def graphcheck_cuda_graphs() -> Iterator[Any]:
    """``torch.cuda``'s graph API emulated on the CPU for this test (``graphcheck.emulate.cuda_graphs()``)."""
    from graphcheck.capture.cuda_emulation import patched

    with patched() as module:
        yield module
