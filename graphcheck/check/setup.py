"""How a run checks its scenarios: which model and contract they run with, and which oracle.

``graphcheck run --model bfloat16 --contract fastdeploy --oracle auto`` (and the
pytest plugin's options of the same names) become one :class:`CheckSetup`.
``apply`` stamps the model and contract onto a scenario's configuration (a
scenario that names its own keeps it when the option is not given), so a
saved failing scenario replays with the model and contract it failed with.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from graphcheck.check.oracles import ORACLE_CHOICES, OracleError, resolve_oracle
from graphcheck.contract import CONTRACT_NAMES
from graphcheck.scenario import MODELS, EngineConfig, Scenario, fit_to_contract

#: ``--model float`` is float32.
MODEL_ALIASES = {"float": "float32"}


@dataclass(frozen=True)
class CheckSetup:
    """``model`` / ``contract``: None keeps each scenario's own; ``oracle``: "auto", "exact", "model-agnostic" or "engine-scheduled"."""

    model: str | None = None
    contract: str | None = None
    oracle: str = "auto"

    def __post_init__(self) -> None:
        if self.model is not None and self.model not in MODELS:
            raise OracleError(f"unknown model {self.model!r}; choose one of {', '.join(MODELS)} (or float)")
        if self.contract is not None and self.contract not in CONTRACT_NAMES:
            raise OracleError(f"unknown contract {self.contract!r}; choose one of {', '.join(CONTRACT_NAMES)}")
        if self.oracle not in ORACLE_CHOICES:
            raise OracleError(f"unknown oracle {self.oracle!r}; choose one of {', '.join(ORACLE_CHOICES)}")
        if self.model is not None:  # the exact oracle on a float model fails here, before any run
            resolve_oracle(self.oracle, EngineConfig(model=self.model))

    @classmethod
    def parse(cls, model: str | None = None, contract: str | None = None, oracle: str | None = None) -> CheckSetup:
        """From option values (``float`` is float32); OracleError names a bad one."""
        if model is not None:
            model = MODEL_ALIASES.get(model, model)
        return cls(model, contract, oracle or "auto")

    @property
    def default(self) -> bool:
        return self == CheckSetup()

    def apply(self, scenario: Scenario) -> Scenario:
        """``scenario`` with this setup's model and contract (unchanged where they are None), fitted to
        that contract (``graphcheck.scenario.fit_to_contract``: e.g. one eos length under fastdeploy)."""
        changes: dict[str, Any] = {}
        if self.model is not None and scenario.config.model != self.model:
            changes["model"] = self.model
        if self.contract is not None and scenario.config.contract != self.contract:
            changes["contract"] = self.contract
        if changes:
            scenario = dataclasses.replace(scenario, config=dataclasses.replace(scenario.config, **changes))
        return fit_to_contract(scenario)

    def oracle_for(self, scenario: Scenario) -> str:
        """The oracle ``scenario`` is checked with (OracleError when impossible)."""
        return resolve_oracle(self.oracle, self.apply(scenario).config)

    def label(self) -> str:
        """A short description for database keys and headers, e.g. ``model=bfloat16 contract=fastdeploy``."""
        parts = [f"{k}={v}" for k, v in (("model", self.model), ("contract", self.contract)) if v is not None]
        if self.oracle != "auto":
            parts.append(f"oracle={self.oracle}")
        return " ".join(parts)

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: Any) -> CheckSetup:
        data = data if isinstance(data, dict) else {}
        return cls.parse(data.get("model"), data.get("contract"), data.get("oracle"))


__all__ = ["CheckSetup", "MODEL_ALIASES"]
