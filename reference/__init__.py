"""The NumPy oracle: the semantics every engine must match token for token.

See reference/README.md for the contract. This package imports only NumPy, the
standard library and graphcheck.scenario (plus graphcheck.driver to run a
scenario), never an engine framework.
"""

if __name__ != "graphcheck.reference":  # the checkout's reference/ folder, imported by its bare name
    raise ImportError(f"{__name__} is graphcheck.reference under another name: import graphcheck.reference instead")

from graphcheck.reference.decoder import ReferenceDecoder, decode, reasoning_status_at
from graphcheck.reference.model import wrap
from graphcheck.reference.rng import add_mod, mix64, uniform, uniform_open0
from graphcheck.reference.sampling import Candidates, candidates, greedy, sample, topp_sample
from graphcheck.reference.verify import RowVerdict, VerifyInput, VerifyResult, VerifyRule, judge_row, naive_step, verify
from graphcheck.reference.weights import NPOS, Weights, make_weights

__all__ = [
    "NPOS",
    "Candidates",
    "ReferenceDecoder",
    "RowVerdict",
    "VerifyInput",
    "VerifyResult",
    "VerifyRule",
    "Weights",
    "add_mod",
    "candidates",
    "decode",
    "greedy",
    "judge_row",
    "make_weights",
    "mix64",
    "naive_step",
    "reasoning_status_at",
    "sample",
    "topp_sample",
    "uniform",
    "uniform_open0",
    "verify",
    "wrap",
]
