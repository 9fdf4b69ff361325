"""Start-up: a cpu ``graphcheck run`` loads none of torch.compile's machinery up to its first example.

The subprocess test runs ``benchmarks/startup_probe.py`` (``graphcheck run`` ended once the
first scenario is checked) in a fresh interpreter and compares the modules of
``torch._dynamo``, ``torch._inductor``, ``torch.distributed``, ``triton`` and ``sympy`` then
loaded with those a bare ``import torch`` loads (torch 2.13 itself imports part of
torch.distributed). No timing: how long that takes is ``graphcheck bench -k startup``'s to say.
The fast tests cover the dispatch modes' own Dynamo wrapper, which used to import
``torch._dynamo`` at a mode's first op (torch wraps ``__torch_dispatch__`` in
``torch._disable_dynamo``).
"""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
import types
from pathlib import Path

import pytest

from graphcheck.capture import torch_ops

from _layers import slow

ROOT = Path(__file__).resolve().parent.parent
PROBE = ROOT / "benchmarks" / "startup_probe.py"


def _probe_module() -> types.ModuleType:
    """benchmarks/startup_probe.py as a module (importing it defines its names and runs nothing)."""
    spec = importlib.util.spec_from_file_location("startup_probe", PROBE)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


MARKER = _probe_module().MARKER


def _probe(*args: str, cwd: Path) -> dict:
    env = {"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin", "HOME": str(cwd)}
    done = subprocess.run(
        [sys.executable, str(PROBE), *args], capture_output=True, text=True, cwd=cwd, env=env, timeout=300
    )
    lines = [line for line in done.stdout.splitlines() if line.startswith(MARKER)]
    assert lines, f"exit {done.returncode}\n{done.stdout[-2000:]}\n{done.stderr[-3000:]}"
    return json.loads(lines[0][len(MARKER) :])


@slow
def test_a_cpu_run_imports_no_compile_machinery_up_to_its_first_example(tmp_path: Path) -> None:
    pytest.importorskip("torch")
    bare = set(_probe("--import-torch", cwd=tmp_path)["modules"])
    assert not {m for m in bare if not m.startswith("torch.distributed")}, bare  # what the floor may hold
    run = _probe(
        "--backend", "cpu", "--suite", "seeds", "--examples", "1", "--seed", "0", "--database", "none", "--quiet",
        "--report-dir", str(tmp_path / "reports"), cwd=tmp_path,
    )  # fmt: skip
    extra = sorted(set(run["modules"]) - bare)
    assert extra == [], f"{len(extra)} modules beyond a bare import torch, e.g. {extra[:10]}"


class _Mode:
    def raw(self, func, types, args=(), kwargs=None):
        return ("raw", func, args, kwargs)


def test_the_mode_wrapper_calls_straight_through_while_dynamo_is_not_loaded(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delitem(sys.modules, "torch._dynamo", raising=False)
    dispatch = torch_ops._dynamo_disabled_when_loaded(_Mode.raw)
    assert dispatch(_Mode(), "op", (), (1,), {"k": 2}) == ("raw", "op", (1,), {"k": 2})
    assert "torch._dynamo" not in sys.modules  # calling it loaded nothing


def test_the_mode_wrapper_runs_past_dynamo_once_it_is_loaded(monkeypatch: pytest.MonkeyPatch) -> None:
    disabled: list[object] = []

    def disable(fn, recursive=True):
        disabled.append(fn)
        return lambda *a: ("disabled", *fn(*a))

    monkeypatch.setitem(sys.modules, "torch._dynamo", types.SimpleNamespace(disable=disable))
    dispatch = torch_ops._dynamo_disabled_when_loaded(_Mode.raw)
    assert dispatch(_Mode(), "op", ())[0] == "disabled"
    assert dispatch(_Mode(), "op", ())[0] == "disabled"
    assert disabled == [_Mode.raw]  # wrapped once, then kept


def test_the_dispatch_modes_opt_out_of_torchs_dynamo_wrapping() -> None:
    pytest.importorskip("torch")
    capture, guard = torch_ops._mode_classes()
    for mode in (capture, guard, torch_ops._forwarding_mode_class()):
        assert mode._should_skip_dynamo() is False
        assert mode.__dict__["__torch_dispatch__"].__wrapped__.__qualname__.endswith("__torch_dispatch__")
