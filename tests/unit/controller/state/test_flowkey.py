"""A 5-tuple's one mapping to and from match fields, for IPv4 and IPv6 alike."""

import pytest

from controller.state.flowkey import FlowKey, five_tuple_match, key_from_fields, pair_key

V4 = FlowKey("10.0.0.1", "10.0.0.5", 17, 40000, 5201)
V6 = FlowKey("fd00::a00:1", "fd00::a00:5", 6, 40000, 5201)


@pytest.mark.parametrize("key", [V4, V6, pair_key(V4), pair_key(V6)])
def test_a_key_survives_its_match(key):
    fields = dict(five_tuple_match(key, in_port=3))
    assert key_from_fields(fields) == key and fields["in_port"] == 3


def test_an_ipv6_key_matches_ipv6_fields_and_any_spelling_reads_back_compressed():
    assert dict(five_tuple_match(V6)) == {"eth_type": 0x86DD, "ipv6_src": "fd00::a00:1", "ipv6_dst": "fd00::a00:5",
                                          "ip_proto": 6, "tcp_src": 40000, "tcp_dst": 5201}
    spelled = {"ip_proto": 6, "ipv6_src": "FD00:0:0:0:0:0:0A00:0001", "ipv6_dst": "fd00::a00:5", "tcp_src": 40000,
               "tcp_dst": 5201}
    assert key_from_fields(spelled) == V6
    with pytest.raises(ValueError):
        key_from_fields(dict(spelled, ipv6_src="fd00::zz"))


def test_link_local_is_fe80_slash_10_only():
    from controller.state.flowkey import is_link_local
    assert all(is_link_local(ip) for ip in ("fe80::1", "FE80::200:ff:fe00:1", "febf::1", "fe9a:1::2"))
    assert not any(is_link_local(ip) for ip in ("fec0::1", "fe8::1", "fd00::a00:1", "10.0.0.1", "ff02::1", "::"))
