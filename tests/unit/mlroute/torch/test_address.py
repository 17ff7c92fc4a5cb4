"""This host's fabric address: the route's source toward the master, not the hostname's address."""

from __future__ import annotations

from mlroute.torch.address import fabric_address, route_source


def test_route_source_is_the_address_the_kernel_picks():
    assert route_source("127.0.0.1") == "127.0.0.1"
    assert route_source("localhost") == "127.0.0.1"


def test_override_and_unknown():
    assert fabric_address("127.0.0.1", {"MLROUTE_ADDR": "10.1.2.3"}) == "10.1.2.3"
    assert fabric_address("127.0.0.1", {}) == "127.0.0.1"
    assert fabric_address(None, {}) is None
    assert fabric_address("no-such-host.invalid", {}) is None  # unresolvable: declare nothing rather than guess
