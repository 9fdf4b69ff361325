"""What ``graphcheck replay`` re-runs: a scenario file, or a report folder with the settings it recorded.

``graphcheck replay FILE.json`` runs the scenario with the backend, ``--emulate``,
``--emulator``, ``--engine`` and ``--inject`` of the command line (default: cpu,
kernel emulator, builtin, no faults). ``graphcheck replay REPORT_DIR`` runs the
folder's ``scenario.json`` with the backend, ``--emulate``, emulator, engine,
injected faults and oracle recorded in its
``divergences.json``, so it reproduces the run that wrote the report; each
option given on the command line overrides its recorded value.
"""

from __future__ import annotations

import argparse
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

from graphcheck.capture.devices import EMULATORS
from graphcheck.check.oracles import ORACLE_CHOICES
from graphcheck.errors import InputError
from graphcheck.scenario import read_regular_file

#: The backend a scenario file is replayed on when the command line names none.
DEFAULT_BACKEND = "cpu"


@dataclass(frozen=True)
class ReplayTarget:
    """A scenario file and the settings to replay it with."""

    scenario_path: Path
    backend: str
    emulate: bool
    faults: tuple[str, ...]
    recorded_in: Path | None = None  # the divergences.json the settings came from, for a report folder
    overridden: tuple[str, ...] = ()  # options the command line gave over the recorded ones
    oracle: str | None = None  # --oracle as given, else as the report recorded it (None: auto)
    engine: str = "builtin"  # --engine as given, else as the report recorded it
    emulator: str = "kernel"  # --emulator as given, else as the report recorded it

    def describe(self, backend_description: str, faults: Sequence[str]) -> list[str]:
        """Lines saying what runs where: the backend, the faults, where the settings came from."""
        lines = [
            f"backend {self.backend} ({backend_description})",
            *([f"engine {self.engine}"] if self.engine != "builtin" else []),
            f"injected: {', '.join(faults)}" if faults else "no injected faults",
        ]
        if self.oracle not in (None, "auto"):
            lines.append(f"oracle {self.oracle}")
        if self.recorded_in is not None:
            given = f"; {', '.join(self.overridden)} from the command line" if self.overridden else ""
            lines.append(f"settings recorded in {self.recorded_in}{given}")
        return lines


def replay_target(args: argparse.Namespace) -> ReplayTarget:
    """The target of ``graphcheck replay`` from its arguments (``file``, ``backend``, ``emulate``, ``inject``)."""
    source = Path(args.file)
    if not source.is_dir():
        oracle = getattr(args, "oracle", None)
        engine = getattr(args, "engine", None) or "builtin"
        return ReplayTarget(
            source,
            args.backend or DEFAULT_BACKEND,
            bool(args.emulate),
            tuple(args.inject or ()),
            oracle=oracle,
            engine=engine,
            emulator=getattr(args, "emulator", None) or "kernel",
        )
    scenario_path = source / "scenario.json"
    if scenario_path.exists() and not scenario_path.is_file():
        raise InputError(f"{scenario_path} is not a regular file: a report folder's scenario.json is a file")
    if not scenario_path.is_file():
        raise InputError(f"{source} is a folder without scenario.json: give a report folder or a scenario file")
    recorded_in = source / "divergences.json"
    run = recorded_run(recorded_in)
    given = {
        "--backend": args.backend is not None,
        "--emulate": args.emulate is not None,
        "--inject": bool(args.inject),
        "--oracle": getattr(args, "oracle", None) is not None,
        "--engine": getattr(args, "engine", None) is not None,
        "--emulator": getattr(args, "emulator", None) is not None,
    }
    return ReplayTarget(
        scenario_path,
        backend=args.backend if args.backend is not None else run["backend"],
        emulate=args.emulate if args.emulate is not None else run["emulate"],
        faults=tuple(args.inject) if args.inject else run["faults"],
        oracle=getattr(args, "oracle", None) or run["oracle"],
        engine=getattr(args, "engine", None) or run["engine"],
        emulator=getattr(args, "emulator", None) or run["emulator"],
        recorded_in=recorded_in,
        overridden=tuple(option for option, present in given.items() if present),
    )


def _a_name(value: Any) -> bool:
    """A recorded name as graphcheck writes them: printable, one line, not absurdly long."""
    return isinstance(value, str) and 0 < len(value) <= 200 and value.isprintable()


def recorded_run(path: Path) -> dict[str, Any]:
    """``backend``, ``emulate``, ``faults``, ``oracle``, ``engine`` and ``emulator`` from the ``run`` object of a report's divergences.json."""
    try:
        document = json.loads(read_regular_file(path))
    except FileNotFoundError:
        raise InputError(
            f"{path} is missing: the folder is not a graphcheck report; replay its scenario.json "
            "with --backend/--emulate/--inject instead"
        ) from None
    except (OSError, UnicodeDecodeError, ValueError, RecursionError) as err:
        raise InputError(f"cannot read the run settings in {path}: {err}") from None
    run = document.get("run") if isinstance(document, dict) else None
    if not isinstance(run, dict):
        raise InputError(f"{path}: no `run` object with the recorded settings")
    backend, emulate, faults = run.get("backend"), run.get("emulate", False), run.get("faults", [])
    if not isinstance(backend, str) or not backend:
        raise InputError(f"{path}: run.backend must be a backend name, got {backend!r:.60}")
    if not isinstance(emulate, bool):
        raise InputError(f"{path}: run.emulate must be true or false, got {emulate!r:.60}")
    if not isinstance(faults, list) or not all(_a_name(f) for f in faults):
        raise InputError(f"{path}: run.faults must be a list of fault names, got {ascii(faults)[:80]}")
    oracle = run.get("oracle", "auto")  # reports before --oracle existed: auto
    if not isinstance(oracle, str) or oracle not in ORACLE_CHOICES:
        raise InputError(f"{path}: run.oracle must be one of {', '.join(ORACLE_CHOICES)}, got {ascii(oracle)[:60]}")
    engine = run.get("engine", "builtin")  # reports before --engine existed: the built-in engine
    if not isinstance(engine, str) or not engine or len(engine) > 300 or not engine.isprintable():
        raise InputError(f"{path}: run.engine must be an engine SPEC, got {engine!r:.60}")
    emulator = run.get("emulator", "kernel")  # written only when not the default kernel emulator
    if emulator not in EMULATORS:
        raise InputError(f"{path}: run.emulator must be one of {', '.join(EMULATORS)}, got {emulator!r:.60}")
    return {
        "backend": backend,
        "emulate": emulate,
        "faults": tuple(faults),
        "oracle": oracle,
        "engine": engine,
        "emulator": emulator,
    }
