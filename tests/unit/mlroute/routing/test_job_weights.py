"""Job weights in the job-level objective (issue 12): a job's rate counts as rate / weight."""

import numpy as np
import pytest

from mlroute.routing import metric
from mlroute.routing.fabric import Fabric
from mlroute.routing.flow import Flow
from mlroute.routing.optimisers import optimise


def three_jobs(weights):
    """Jobs a, b, c: one flow each from ToR 0 to ToR 1 over 2 spines, so two of them must share a spine."""
    return [Flow(i, 4 + i, job=name, weight=weights.get(name, 1.0)) for i, name in enumerate("abc")]


def alone(weights):
    fabric = Fabric.clos(2, 2, 4)
    flows = three_jobs(weights)
    rates = metric.rates(fabric, flows, optimise("mlroute", fabric, flows, objective="job").paths)
    return [f.job for f, r in zip(flows, rates) if r == pytest.approx(1.0)]


def test_the_heavier_job_gets_the_spine_of_its_own():
    # unweighted, the three routings tie job for job; mlroute keeps the greedy's (b alone)
    assert alone({}) == ["b"]
    assert alone({"a": 2.0}) == ["a"]  # e.g. a's GPUs compute twice as long per byte sent (Crux's intensity)
    assert alone({"c": 3.0}) == ["c"]


def test_job_rates_divide_by_the_weight():
    flows = [Flow(0, 1, job="a", weight=2.0), Flow(0, 2, job="a", weight=2.0), Flow(1, 2, job="b")]
    labels = metric.job_labels(flows)
    assert labels == [metric.WeightedJob("a", 2.0)] * 2 + ["b"]
    assert np.allclose(metric.job_rates([0.8, 0.6, 0.5], labels), [0.3, 0.5])
    # b at 0.5 beats a at 0.6 / 2: raising a first is what the weighted order prefers
    assert metric.compare(np.array([0.8, 0.8, 0.4]), np.array([0.8, 0.6, 0.5]), labels, "job") > 0


@pytest.mark.parametrize("flows, message", [
    ([Flow(0, 1, job="a", weight=2.0), Flow(0, 2, job="a")], "different weights"),
    ([Flow(0, 1, job="a", weight=0.0)], "positive"),
])
def test_bad_weights_are_refused(flows, message):
    with pytest.raises(ValueError, match=message):
        metric.job_labels(flows)
