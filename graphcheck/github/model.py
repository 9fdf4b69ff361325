"""What the GitHub step summary and annotations describe: one finished run, as the report writers saw it."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterator, Mapping, Sequence

from graphcheck.check.diff import Divergence
from graphcheck.check.records import CheckOutcome
from graphcheck.github.workflow import repo_relative
from graphcheck.report.localisation import BlobLinks
from graphcheck.report.model import ReportPaths, RunInfo, default_replay_command
from graphcheck.search.result import SuiteResult


@dataclass(frozen=True)
class CiContext:
    """Where the run happens, from the runner's environment; every field may be empty outside Actions."""

    workspace: Path
    repository: str = ""  # "owner/name"
    run_id: str = ""
    server_url: str = ""
    artifact: str = ""  # name of the artifact the workflow uploads the report folder as
    sha: str = ""  # the commit the workflow runs on

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> CiContext:
        env = os.environ if environ is None else environ
        return cls(
            workspace=Path(env.get("GITHUB_WORKSPACE") or os.getcwd()),
            repository=env.get("GITHUB_REPOSITORY", ""),
            run_id=env.get("GITHUB_RUN_ID", ""),
            server_url=env.get("GITHUB_SERVER_URL", "").rstrip("/"),
            artifact=env.get("GRAPHCHECK_REPORT_ARTIFACT", ""),
            sha=env.get("GITHUB_SHA", ""),
        )

    @property
    def blob_links(self) -> BlobLinks | None:
        """Links to the repository's files at the run's commit (None outside Actions)."""
        return BlobLinks.from_env(
            {"GITHUB_SERVER_URL": self.server_url, "GITHUB_REPOSITORY": self.repository, "GITHUB_SHA": self.sha}
        )

    @property
    def run_url(self) -> str:
        """The workflow run's page, whose Artifacts section lists the uploads ("" outside Actions)."""
        if not (self.server_url and self.repository and self.run_id):
            return ""
        return f"{self.server_url}/{self.repository}/actions/runs/{self.run_id}"


@dataclass(frozen=True)
class FinishedRun:
    """The objects ``write_report`` got, plus the suites fuzzed and the command line."""

    outcomes: Sequence[CheckOutcome]
    run_info: RunInfo
    paths: ReportPaths
    command: str
    suites: Sequence[SuiteResult] = ()  # the fuzzed suites
    ci: CiContext = field(default_factory=lambda: CiContext(Path.cwd()))

    @property
    def clean(self) -> bool:
        return all(o.clean for o in self.outcomes)

    @property
    def failure_count(self) -> int:
        return sum(len(o.failures) for o in self.outcomes)

    @property
    def ambiguous_count(self) -> int:
        return sum(len(o.ambiguous) for o in self.outcomes)

    def replay_command(self) -> str:
        """``graphcheck replay`` of the shrunk scenario, its path relative to the workspace where it lies inside."""
        return default_replay_command(self.run_info)(Path(repo_relative(self.paths.scenario_json, self.ci.workspace)))

    def divergences(self) -> Iterator[tuple[CheckOutcome, Divergence]]:
        """Failing divergences, most telling first: outcome by outcome, each by step with causes first.

        The first one is the run's headline, the same the console and the HTML show.
        """
        for outcome in self.outcomes:
            for div in outcome.failures:
                yield outcome, div

    def first(self) -> tuple[CheckOutcome, Divergence] | None:
        return next(self.divergences(), None)
