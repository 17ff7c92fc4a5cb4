"""A fabric and its failures from user-level parameters (``--fabric``, ``--tors``, ``--failed-spines``,
``--failed-links``): the one parser and validator ``mlroute route``, ``mlroute simulate`` and ``mlroute
reproduce`` share.

Syntax: failed spines (cores on a fat-tree) are indices from 0, comma-separated, with ranges: ``28,29,30,31`` or
``28-31``. A failed link is a cable ``SWITCH:SWITCH`` (``tor0:spine3``), comma-separated; it is the one
syntax, because switch names of learned graphs may contain ``-``. Errors are :class:`FabricError` with a
message that names the option.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from mlroute.routing.fabric import Fabric, FabricError

FABRIC_KINDS = ("clos", "fattree")
LINK_SEPARATOR = ":"


def parse_index_list(text: str | None, what: str) -> list[int]:
    """``"28,29,30"`` -> [28, 29, 30]; ranges ``"28-31"`` too; an element listed twice is an error."""
    if text is None or str(text).strip() == "":
        return []
    out: list[int] = []
    for part in str(text).split(","):
        part = part.strip()
        if part:
            out.extend(_index_or_range(part, what))
    if len(set(out)) != len(out):
        raise FabricError(f"{what}: {text!r} lists an element twice")
    return out


def _index_or_range(part: str, what: str) -> Iterable[int]:
    try:
        if "-" not in part[1:]:
            return [int(part)]
        a, b = (int(x) for x in part.split("-", 1))
    except ValueError:
        raise FabricError(f"{what}: {part!r} is not an integer or a range a-b") from None
    if b < a:
        raise FabricError(f"{what}: {part!r} is not an integer or a range a-b")
    return range(a, b + 1)


def parse_links(text: str | None, what: str = "--failed-links") -> list[tuple[str, str]]:
    """``"tor0:spine1,tor3:spine2"`` -> [("tor0", "spine1"), ("tor3", "spine2")]."""
    if not text:
        return []
    out = []
    for part in text.split(","):
        part = part.strip()
        if not part:
            continue
        u, sep, v = part.partition(LINK_SEPARATOR)
        if not sep or not u or not v:
            raise FabricError(f"{what}: {part!r} is not of the form SWITCH{LINK_SEPARATOR}SWITCH "
                              f"(e.g. tor0{LINK_SEPARATOR}spine3)")
        out.append((u, v))
    return out


def format_link(u: object, v: object) -> str:
    """A cable in the syntax :func:`parse_links` reads."""
    return f"{u}{LINK_SEPARATOR}{v}"


def build_fabric(kind: str, tors: int | None, spines: int | None, hosts_per_tor: int | None,
                 k: int | None = None) -> Fabric:
    """A ``clos`` (``tors`` x ``spines`` x ``hosts_per_tor``) or a k-ary ``fattree``, validated."""
    if kind == "clos":
        for what, v in (("--tors", tors), ("--spines", spines), ("--hosts-per-tor", hosts_per_tor)):
            if v is None or v < 1:
                raise FabricError(f"{what} must be a positive integer (got {v})")
        return Fabric.clos(tors, spines, hosts_per_tor)  # type: ignore[arg-type]
    if kind == "fattree":
        if k is None or k < 2 or k % 2:
            raise FabricError(f"--k must be an even integer >= 2 for a fat-tree (got {k})")
        return Fabric.fattree(k)
    raise FabricError(f"unknown fabric {kind!r} ({' or '.join(FABRIC_KINDS)})")


def top_switches(fabric: Fabric, failed: Sequence[int | str], what: str = "--failed-spines") -> list[str]:
    """The names of the failed top switches (indices from 0, or names); failing them all is an error, since it
    leaves no path between ToRs."""
    tops = fabric.tops
    word = "core" if fabric.kind == "fattree" else "spine"
    names = []
    for s in failed:
        if isinstance(s, str):
            if s not in tops:
                raise FabricError(f"{what}: {s!r} is not a spine/core switch")
            names.append(s)
        elif not 0 <= s < len(tops):
            raise FabricError(f"{what}: {word} {s} is not in the fabric ({word}s are numbered 0..{len(tops) - 1})")
        else:
            names.append(tops[s])
    if tops and len(set(names)) >= len(tops):
        raise FabricError(f"{what}: failing all {len(tops)} {word}s partitions the fabric")
    return names


def check_links(fabric: Fabric, links: Iterable[tuple[str, str]], what: str = "--failed-links") -> None:
    """Every link must be a cable of the fabric."""
    for u, v in links:
        if not fabric.graph.has_edge(u, v):
            raise FabricError(f"{what}: there is no link {format_link(u, v)} in the fabric")


def fail(fabric: Fabric, switches: Iterable[str], links: Iterable[tuple[str, str]]) -> Fabric:
    """Fail the switches and cables (checked by :func:`top_switches` / :func:`check_links`) now."""
    for s in switches:
        fabric.fail_switch(s)
    for u, v in links:
        fabric.fail_link(u, v)
    return fabric
