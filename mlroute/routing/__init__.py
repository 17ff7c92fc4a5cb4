"""Routing core: fabric model, the network-wide metric, and the optimisers (pure Python, no Ryu)."""

from mlroute.routing.fabric import Fabric, FabricError, PathSet  # noqa: F401
from mlroute.routing.flow import Flow  # noqa: F401

__all__ = ["Fabric", "FabricError", "Flow", "PathSet"]
