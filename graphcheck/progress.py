"""A live progress line for long runs: examples, steps, divergences, elapsed time."""

from __future__ import annotations

import time

from rich.console import Console
from rich.live import Live
from rich.text import Text

from graphcheck.records import CheckOutcome


class RunProgress:
    """Counts lockstep runs as they finish and shows them on one live line."""

    def __init__(self, console: Console, *, enabled: bool = True):
        self.console = console
        self.enabled = enabled and console.is_terminal
        self.examples = self.steps = self.divergences = 0
        self.current = ""
        self.budget = 0
        self._started = time.perf_counter()
        self._live: Live | None = None

    def __enter__(self) -> "RunProgress":
        if self.enabled:
            self._live = Live(self._render(), console=self.console, refresh_per_second=4, transient=True)
            self._live.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        if self._live is not None:
            self._live.__exit__(*exc)

    def start_suite(self, name: str, budget: int) -> None:
        self.current, self.budget = name, budget
        self._refresh()

    def example(self, name: str, outcome: CheckOutcome) -> None:
        self.current = name
        self.examples += 1
        self.steps += outcome.steps_run
        self.divergences += len(outcome.failures)
        self._refresh()

    def _refresh(self) -> None:
        if self._live is not None:
            self._live.update(self._render())

    def _render(self) -> Text:
        elapsed = time.perf_counter() - self._started
        budget = f" (budget {self.budget}/suite)" if self.budget else ""
        return Text.from_markup(
            f"[bold]{self.current or 'starting'}[/]{budget}  examples {self.examples}  steps {self.steps}  "
            f"divergences [{'red' if self.divergences else 'green'}]{self.divergences}[/]  {elapsed:.0f}s"
        )
