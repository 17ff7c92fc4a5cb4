"""The worked examples in the routing core's docstrings (Hedera's estimator, the max-min water-filling) run as
tests: an example that drifts from the code fails here."""

import doctest

import pytest

from mlroute.routing import demand, metric


@pytest.mark.parametrize("module", [demand, metric], ids=lambda m: m.__name__)
def test_the_worked_examples_hold(module):
    result = doctest.testmod(module, optionflags=doctest.NORMALIZE_WHITESPACE)
    assert result.attempted > 0 and result.failed == 0, result
