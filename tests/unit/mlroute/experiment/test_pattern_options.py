"""One parser for the experiment's NAME:AxB[,key=value] patterns: numbers and words read, the rest refused by name."""

import pytest

from mlroute.experiment.pattern_options import ALLREDUCE_NUMBERS, parse

WORDS = {"placement": ("random", "pods")}


def test_numbers_and_words_become_attributes():
    assert parse("x:4x2,mb=0.5,iters=3,placement=pods", "x", "test", ALLREDUCE_NUMBERS, WORDS) == \
        (4, 2, {"mb": 0.5, "iterations": 3, "placement": "pods"})
    assert parse("x:1x2", "x", "test", ALLREDUCE_NUMBERS) == (1, 2, {})


@pytest.mark.parametrize("spec, said", [
    ("x:4", "expected x:AxB[,mb=...]"), ("y:4x4", "expected"), ("x:4x4,speed=3", "'speed' (mb, iters, compute"),
    ("x:4x4,iters=1.5", "iters takes an integer"), ("x:4x4,mb=a", "mb takes a number"),
    ("x:4x4,placement=rack", "placement is one of random, pods"), ("x:4x4,placement=pods", "'placement'"),
])
def test_bad_patterns_name_what_is_wrong(spec, said):
    with pytest.raises(ValueError, match="bad test") as err:
        parse(spec, "x", "test", ALLREDUCE_NUMBERS, WORDS if "rack" in spec else None)
    assert said in str(err.value)
