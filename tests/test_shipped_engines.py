"""The engines graphcheck ships resolve by name from a checkout that was never installed.

On a GPU machine graphcheck often runs as ``PYTHONPATH=. python -m graphcheck.cli``: no
package metadata, so no ``graphcheck.engines`` entry points. ``--engine hf-cb`` (and the
other shipped names) must still resolve; ``vllm`` stays lazy, and where vLLM is missing it
is the backend-unavailable line (exit 3), not "no engine of that name".
"""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest

from graphcheck.check import engines
from graphcheck.check.engines import SHIPPED, EngineSpecError, registered_engines, resolve_engine
from graphcheck.errors import BackendUnavailableError

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture
def no_entry_points(monkeypatch: pytest.MonkeyPatch) -> None:
    """As in a bare checkout: the graphcheck.engines group is empty."""
    monkeypatch.setattr(engines.metadata, "entry_points", lambda **_: [])


def test_shipped_names_match_the_registered_entry_points() -> None:
    import tomllib  # noqa: PLC0415 (3.11+: the test extra's python)

    declared = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]["entry-points"]
    assert declared["graphcheck.engines"] == SHIPPED


@pytest.mark.usefixtures("no_entry_points")
def test_shipped_engines_resolve_without_entry_points() -> None:
    assert list(registered_engines()) == ["builtin", *sorted(SHIPPED)]
    choice = resolve_engine("builtin-torch-cuda")
    assert choice.factory.__module__ == "graphcheck.engines.torch_cuda"
    assert choice.source.startswith("shipped with graphcheck")
    with pytest.raises(EngineSpecError, match="no engine of that name .*hf-cb, vllm"):
        resolve_engine("not-an-engine")


@pytest.mark.usefixtures("no_entry_points")
def test_vllm_without_vllm_is_backend_unavailable_not_unknown() -> None:
    if importlib.util.find_spec("vllm") is not None:
        pytest.skip("vLLM is installed here")
    with pytest.raises(BackendUnavailableError, match="needs vLLM"):
        resolve_engine("vllm")


@pytest.mark.skipif(importlib.util.find_spec("transformers") is None, reason="transformers not installed")
def test_hf_cb_resolves_from_a_bare_checkout(tmp_path: Path) -> None:
    """``python -m graphcheck.cli faults --engine hf-cb`` with the checkout on PYTHONPATH and no metadata."""
    code = (
        "import sys; from importlib import metadata; "
        "metadata.entry_points = lambda **_: []; "  # what a never-installed checkout sees
        "from graphcheck.cli import main; sys.exit(main(['faults', '--engine', 'hf-cb']))"
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "cb-key-drops-kv" in done.stdout
