"""Progress of a long run: what is being searched or shrunk, scenarios checked, steps, elapsed time.

On a terminal it is one live line, redrawn in place. Anywhere else (a CI log,
a pipe) nothing can be redrawn, so a plain line is printed every
``interval_s`` seconds instead, and one line when each suite ends.
"""

from __future__ import annotations

import time
from typing import Callable

from rich.console import Console
from rich.live import Live
from rich.text import Text

from graphcheck.check.records import CheckOutcome
from graphcheck.display import one_line
from graphcheck.scenario import Scenario
from graphcheck.search.fuzz import SearchProgress
from graphcheck.search.result import SuiteResult

#: Seconds between two plain progress lines when the output is not a terminal.
PLAIN_INTERVAL_S = 10.0


def plural(n: int, word: str) -> str:
    """``1 request``, ``2 requests``."""
    return f"{n:,} {word}" if n == 1 else f"{n:,} {word}s"


class RunProgress:
    """Follows a run (suite searches, then single scenarios) and shows where it stands."""

    def __init__(
        self,
        console: Console,
        *,
        enabled: bool = True,
        interval_s: float = PLAIN_INTERVAL_S,
        clock: Callable[[], float] = time.perf_counter,
    ):
        self.console = console
        self.live = enabled and console.is_terminal
        self.plain = enabled and not console.is_terminal
        self.interval_s = interval_s
        self._clock = clock
        self._started = self._last_line = clock()
        self.examples = self.steps = 0  # scenarios checked and their steps, over the whole run
        self._search: SearchProgress | None = None
        self._current = ""
        self._live: Live | None = None

    def __enter__(self) -> RunProgress:
        if self.live:
            self._live = Live(self._render(), console=self.console, refresh_per_second=4, transient=True)
            self._live.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        if self._live is not None:
            self._live.__exit__(*exc)

    def start_suite(self, name: str, budget: int) -> None:
        self._current = f"suite {name}"
        self._search = SearchProgress(name, 0, 0, budget, False, None)
        self._refresh()

    def search(self, progress: SearchProgress) -> None:
        """One more example of the current suite's search (``fuzz_suite``'s ``on_progress``)."""
        before = self._search
        self.examples += progress.examples - (before.examples if before else 0)
        self.steps += progress.steps - (before.steps if before else 0)
        self._search = progress
        self._refresh()

    def end_suite(self, result: SuiteResult) -> None:
        self._search = None
        if self.live or self.plain:
            self.console.print(suite_line(result), highlight=False, soft_wrap=True)

    def demo(self, scenario: Scenario, outcome: CheckOutcome) -> None:
        """A demo scenario was checked (the suite runner's ``on_demo``)."""
        self.example(scenario.name, outcome)

    def example(self, name: str, outcome: CheckOutcome) -> None:
        """A single scenario (not part of a search) was checked."""
        self._current = name
        self._search = None
        self.examples += 1
        self.steps += outcome.steps_run
        self._refresh()

    def _refresh(self) -> None:
        if self._live is not None:
            self._live.update(self._render())
        elif self.plain and self._clock() - self._last_line >= self.interval_s:
            self._last_line = self._clock()
            # soft_wrap: a plain log line stays one line whatever the console's width
            self.console.print(self._render(), highlight=False, soft_wrap=True)

    def _render(self) -> Text:
        elapsed = self._clock() - self._started
        text = Text()
        text.append(one_line(self._current or "starting"), style="bold")
        text.append(f"  {self._phase()}  ({plural(self.examples, 'scenario')} checked in all, {elapsed:.0f}s)")
        return text

    def _phase(self) -> str:
        search = self._search
        if search is None:
            return "checking"
        if not search.shrinking:
            return f"searching: scenario {search.examples} of up to {search.budget}"
        requests, steps = search.smallest or (0, 0)
        return f"shrinking: {plural(search.examples, 'scenario')} checked, smallest {requests} req x {steps} steps"


def _replayed(result: SuiteResult) -> str:
    """`` (412 replayed a graph)``, of the graph engine's steps; "" when it ran none."""
    steps = result.coverage.graph_steps
    return f" ({result.coverage.replayed_steps:,} replayed a graph)" if steps else ""


def suite_line(result: SuiteResult) -> Text:
    """``suite padding: clean, 37 scenarios, 64 steps, 2.1s`` (plain text: nothing in it is markup); the demo
    scenarios' line is ``built-in scenarios: ...``, and a result that ended on an error says ``failed``."""
    counts = f"{plural(result.examples, 'scenario')}, {plural(result.steps, 'step')}{_replayed(result)}, {result.elapsed_s:.1f}s"
    text = Text("built-in scenarios: " if result.builtin else f"suite {one_line(result.name)}: ")
    if result.stop is not None:
        text.append("failed", style="red")
        text.append(f" {one_line(result.stop.message.strip().splitlines()[0] if result.stop.message.strip() else '')}")
        return text
    if result.clean:
        text.append("clean" + (" (interrupted)" if result.interrupted else ""), style="green")
        text.append(f", {counts}")
        return text
    text.append("divergence", style="red")
    if result.builtin:
        text.append(f", {counts}")
        return text
    at = f" at example {result.first_failure_at}" if result.first_failure_at else ""
    text.append(f"{at} ({result.shrink_state}), {counts}")
    return text
