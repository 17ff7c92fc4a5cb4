"""Every exception class of mlroute (and the controller's configuration error) shares one base, MlrouteError,
and keeps ValueError where callers catch that."""

from __future__ import annotations

import importlib
import inspect
import pkgutil

import pytest

import mlroute
from mlroute.errors import MlrouteError, UsageError


def _mlroute_modules():
    for info in pkgutil.walk_packages(mlroute.__path__, "mlroute."):
        try:
            yield importlib.import_module(info.name)
        except ImportError:  # an optional extra (mininet, scipy, matplotlib) that is not installed
            continue


def test_every_error_class_derives_from_mlroute_error():
    found = {}
    for module in _mlroute_modules():
        for name, obj in vars(module).items():
            if inspect.isclass(obj) and issubclass(obj, Exception) and obj.__module__ == module.__name__:
                found[f"{module.__name__}.{name}"] = obj
    assert {"mlroute.routing.fabric.FabricError", "mlroute.workloads.jobs.WorkloadError",
            "mlroute.errors.UsageError"} <= set(found)
    # SimulationError (mlroute.sim.engine) is the simulator's, changed with it
    outside = sorted(n for n, c in found.items() if not issubclass(c, MlrouteError)
                     and n != "mlroute.sim.engine.SimulationError")
    assert outside == []


@pytest.mark.parametrize("path, name", [
    ("mlroute.routing.fabric", "FabricError"), ("mlroute.workloads.flowfile", "FlowFileError"),
    ("mlroute.workloads.patterns", "PatternError"), ("mlroute.workloads.jobs", "WorkloadError"),
    ("mlroute.sim.scenario", "ScenarioError"), ("controller.config", "ConfigError"),
])
def test_input_errors_are_still_value_errors(path, name):
    cls = getattr(importlib.import_module(path), name)
    assert issubclass(cls, MlrouteError) and issubclass(cls, ValueError)


def test_usage_error_is_an_mlroute_error():
    assert issubclass(UsageError, MlrouteError)
