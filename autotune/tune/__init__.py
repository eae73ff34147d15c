"""Tuning a family's problems on a device: the loop (`loop`), what is known per problem
(`ledger`), re-timing and cross-checking (`retime`) and the results (`summary`)."""

from autotune.tune.loop import OTHER_DEVICES, Budget, Listener, StopFlag, Tuner
from autotune.tune.summary import ProblemResult

__all__ = ["OTHER_DEVICES", "Budget", "Listener", "ProblemResult", "StopFlag", "Tuner"]
