"""What an engine logs goes to the report folder's engine.log, with one console line that counts it.

An engine that logs through its own ``logging.StreamHandler`` on stderr (as transformers and vLLM
do), through the root logger, and with ``warnings.warn``: none of it reaches the console during
``graphcheck run``; all of it is in ``reports/<run-id>/engine.log``.
"""

from __future__ import annotations

import logging
import sys
import warnings
from pathlib import Path

import pytest

from graphcheck.cli import main
from graphcheck.cli.engine_log import FILE_NAME, captured

NOISY = """
import logging
import sys
import warnings

from graphcheck.backends.engine import Engine

LOG = logging.getLogger("noisy_engine")
LOG.addHandler(logging.StreamHandler(sys.stderr))  # a library's own console handler
LOG.propagate = False


class Noisy(Engine):
    def __init__(self, *args, **kwargs):
        LOG.warning("turning off accelerator graphs (noisy)")
        super().__init__(*args, **kwargs)

    def step(self, t, overrides):
        logging.getLogger("noisy_engine.root_bound").warning("a step of the noisy engine")
        warnings.warn("noisy engine step warning", UserWarning, stacklevel=1)
        return super().step(t, overrides)
"""


def test_a_noisy_engine_logs_into_the_report_not_the_console(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "noisy_engine.py").write_text(NOISY, encoding="utf-8")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "noisy_engine", raising=False)
    code = main(
        ["run", "--engine", "noisy_engine:Noisy", "--suite", "padding", "--examples", "1", "--steps", "2"]
        + ["--database", "none", "--report-dir", str(tmp_path / "reports")]
    )
    out, err = capsys.readouterr()
    assert code == 0, out + err
    for said in ("turning off accelerator graphs", "a step of the noisy engine", "noisy engine step warning"):
        assert said not in out + err
    (report,) = (tmp_path / "reports").iterdir()
    logged = (report / FILE_NAME).read_text(encoding="utf-8")
    assert "turning off accelerator graphs" in logged and "a step of the noisy engine" in logged
    assert "UserWarning" in logged and "noisy engine step warning" in logged
    assert 'href="engine.log"' in (report / "index.html").read_text(encoding="utf-8")  # the report links it
    lines = [line for line in out.splitlines() if line.startswith("engine log: ")]
    assert len(lines) == 1 and str(report / FILE_NAME) in lines[0], out


def test_capture_is_undone_and_files_keep_their_handlers(tmp_path: Path) -> None:
    to_file = logging.FileHandler(tmp_path / "own.log")
    logger = logging.getLogger("graphcheck-test-engine-log")
    logger.addHandler(to_file)
    logger.addHandler(logging.StreamHandler(sys.stderr))
    logger.propagate = False
    emit = logging.StreamHandler.emit
    try:
        with captured(tmp_path) as log:
            logger.warning("once")  # two handlers: one line in engine.log, one in own.log
            logger.info("below the logger's level: not a record")
            with warnings.catch_warnings():
                warnings.simplefilter("always")
                warnings.warn("w", DeprecationWarning, stacklevel=1)
        assert (log.records, log.warnings) == (2, 2)
        assert log.summary() == f"engine log: 2 lines (2 warnings) in {tmp_path / FILE_NAME}"
        assert "once" in (tmp_path / "own.log").read_text()
        assert logging.StreamHandler.emit is emit
    finally:
        logger.handlers.clear()
        to_file.close()
    with captured(tmp_path / "nothing") as quiet:
        pass
    assert quiet.summary() is None and not (tmp_path / "nothing").exists()
