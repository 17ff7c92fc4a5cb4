"""The ``NAME:AxB[,key=value...]`` traffic patterns of ``mlroute experiment`` (``allreduce:4x4,mb=2``,
``torch-allreduce:4x4,placement=interleaved-pods``): one parser, so every pattern reads and refuses options alike."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

#: the options every all-reduce pattern takes: option -> (attribute, type)
ALLREDUCE_NUMBERS: Mapping[str, tuple[str, type]] = {"mb": ("mb", float), "iters": ("iterations", int),
                                                     "compute": ("compute_s", float)}


def parse(spec: str, name: str, what: str, numbers: Mapping[str, tuple[str, type]],
          words: Mapping[str, Sequence[str]] | None = None) -> tuple[int, int, dict[str, Any]]:
    """``name:AxB`` and its options: (A, B, {attribute: value}). ``numbers``: option -> (attribute, int or float);
    ``words``: option (= attribute) -> the values it takes. ValueError naming the pattern (``what``) and what is
    wrong: the shape, an unknown option, a value that is not of its kind."""
    words = words or {}
    keys = [*numbers, *words]
    usage = f"{name}:AxB" + "".join(f"[,{k}=...]" for k in keys)
    m = re.fullmatch(rf"{re.escape(name)}:(\d+)x(\d+)((?:,\w+=[\w.-]+)*)", spec)
    if not m:
        raise ValueError(f"bad {what} pattern {spec!r}: expected {usage}")
    out: dict[str, Any] = {}
    for opt in filter(None, m.group(3).split(",")):
        key, value = opt.split("=")
        if key in words:
            if value not in words[key]:
                raise ValueError(f"bad {what} option {opt!r}: {key} is one of {', '.join(words[key])}")
            out[key] = value
        elif key in numbers:
            attr, kind = numbers[key]
            try:
                out[attr] = kind(value)
            except ValueError:
                raise ValueError(f"bad {what} option {opt!r}: {key} takes {'an integer' if kind is int else 'a number'}"
                                 ) from None
        else:
            raise ValueError(f"bad {what} option {key!r} ({', '.join(keys)})")
    return int(m.group(1)), int(m.group(2)), out
