"""Switch tier names and ranks: the one definition the fabric model, the controller's tier inference, its
configuration and its TE rules all use.

A 2-tier Clos (leaf-spine) has ``leaf`` and ``spine`` switches; a 3-tier fat-tree ``edge``, ``aggregation`` and
``core``. ``tor`` and ``agg`` are accepted as synonyms of ``leaf`` and ``aggregation`` (the fabric generators'
switch names). A tier's rank is its height in its own layout (0 = host-facing); the top tier (``spine`` /
``core``) is whatever rank the layout's height gives it, see :func:`rank`.
"""

from __future__ import annotations

LEAF = "leaf"
SPINE = "spine"
EDGE = "edge"
AGGREGATION = "aggregation"
CORE = "core"

#: The tiers of each layout, host-facing tier first.
LEAF_SPINE_TIERS = (LEAF, SPINE)
FAT_TREE_TIERS = (EDGE, AGGREGATION, CORE)

#: Other names accepted for a tier.
SYNONYMS = {"tor": LEAF, "agg": AGGREGATION}

#: The tiers at the top of their layout (their rank depends on whether the layout has an aggregation tier).
TOP_TIERS = (SPINE, CORE)

#: Rank of each canonical tier in its own layout (0 = host-facing).
TIER_RANK = {LEAF: 0, EDGE: 0, AGGREGATION: 1, SPINE: 1, CORE: 2}


def canonical(tier: object) -> str | None:
    """The canonical name of a tier or synonym; ``None`` for anything else."""
    if not isinstance(tier, str):
        return None
    name = SYNONYMS.get(tier, tier)
    return name if name in TIER_RANK else None


def rank(tier: str, three_tier: bool) -> int:
    """Rank of a canonical tier in a fabric with (``three_tier``) or without an aggregation tier: the top tier
    sits right above the highest lower tier, so a ``core`` in a 2-tier graph ranks like a spine."""
    if tier in TOP_TIERS:
        return 2 if three_tier else 1
    return TIER_RANK[tier]
