"""controller/cluster/roles.py: the role each switch is asked for, its answers, fencing and the write gate."""

import pytest

from controller.cluster import roles
from controller.cluster.roles import (
    CONFIRMED,
    FENCED,
    MASTER,
    NOTHING,
    OFPBRC_IS_SLAVE,
    OFPET_BAD_REQUEST,
    OFPET_ROLE_REQUEST_FAILED,
    OFPRRFC_STALE,
    RETRY,
    SLAVE,
    RoleRequest,
    SwitchRoles,
)

U64 = 1 << 64


@pytest.mark.parametrize("a, b, expected", [
    (2, 1, 1), (1, 2, -1), (5, 5, 0),
    (0, U64 - 1, 1),  # wrapped around: 0 comes after 2^64 - 1
    (U64 - 1, 0, -1),
    (1 << 63, 0, -(1 << 63)),  # half the circle away: older (the signed difference's most negative value)
    ((1 << 63) - 1, 0, (1 << 63) - 1),
])
def test_generations_compare_by_their_signed_64_bit_difference(a, b, expected):
    assert roles.distance(a, b) == expected
    assert roles.newer(a, b) == (expected > 0)


def _leader(dpids=(1, 2), generation=7):
    r = SwitchRoles()
    for dpid in dpids:
        r.connected(dpid)
    return r, r.lead(generation)


def test_a_new_leader_asks_every_switch_for_master_at_its_generation_and_writes_only_once_confirmed():
    r, asked = _leader()
    assert asked == [RoleRequest(1, MASTER, 7), RoleRequest(2, MASTER, 7)]
    assert not r.may_write(1)  # asked, not confirmed
    assert r.reply(1, MASTER, 7) == CONFIRMED
    assert r.may_write(1) and not r.may_write(2)
    assert r.reply(2, MASTER, 6) == NOTHING and not r.may_write(2)  # a reply to an older request: not yet


def test_a_switch_connecting_to_a_leader_is_asked_for_master_and_is_not_writable_before_it_answers():
    r, _ = _leader(dpids=())
    assert r.connected(9) == RoleRequest(9, MASTER, 7)
    assert not r.may_write(9)
    r.reply(9, MASTER, 7)
    r.connected(9)  # reconnected: a new connection is EQUAL
    assert not r.may_write(9)


def test_a_follower_asks_for_slave_at_the_generation_it_knows_and_never_writes():
    r = SwitchRoles()
    assert r.connected(1) == RoleRequest(1, SLAVE, 0)
    assert r.follow(4) == [RoleRequest(1, SLAVE, 4)]
    assert r.reply(1, SLAVE, 4) == NOTHING
    assert not r.may_write(1)
    assert r.follow(5) == []  # already SLAVE: a new leader does not change that


def test_a_followers_stale_request_is_asked_again_when_it_learns_the_newer_generation():
    r = SwitchRoles()
    r.connected(1)
    assert r.error(1, OFPET_ROLE_REQUEST_FAILED, OFPRRFC_STALE) == RETRY
    assert r.follow(9) == [RoleRequest(1, SLAVE, 9)]


def test_a_followers_refused_writes_are_expected_not_fencing():
    r = SwitchRoles()
    r.connected(1)
    assert r.error(1, OFPET_BAD_REQUEST, OFPBRC_IS_SLAVE) == NOTHING


@pytest.mark.parametrize("err_type, code", [(OFPET_ROLE_REQUEST_FAILED, OFPRRFC_STALE),
                                            (OFPET_BAD_REQUEST, OFPBRC_IS_SLAVE)])
def test_a_leader_told_stale_or_is_slave_is_fenced_and_steps_down_writing_nothing(err_type, code):
    r, _ = _leader()
    r.reply(1, MASTER, 7)
    r.reply(2, MASTER, 7)
    assert r.error(2, err_type, code) == FENCED
    assert r.step_down() == [1, 2]  # the switches the shell must stop writing to
    assert not r.may_write(1) and not r.may_write(2)
    assert r.follow(8) == [RoleRequest(1, SLAVE, 8), RoleRequest(2, SLAVE, 8)]


def test_a_reply_naming_a_newer_generation_fences_the_leader():
    r, _ = _leader()
    assert r.reply(1, MASTER, 8) == FENCED


def test_other_errors_change_nothing():
    r, _ = _leader()
    r.reply(1, MASTER, 7)
    assert r.error(1, 5, 2) == NOTHING and r.may_write(1)
    assert r.error(99, OFPET_BAD_REQUEST, OFPBRC_IS_SLAVE) == NOTHING  # a switch it does not know


def test_a_leaders_generation_must_grow_even_across_the_wrap():
    r, _ = _leader(generation=U64 - 1)
    r.step_down()
    assert r.lead(0) == [RoleRequest(1, MASTER, 0), RoleRequest(2, MASTER, 0)]  # 0 is newer than 2^64 - 1
    r.step_down()
    with pytest.raises(ValueError, match="must grow"):
        r.lead(0)


def test_a_leader_may_have_seen_its_own_generation_through_the_watch_first():
    """The generation's watch (kazoo's thread) can tell the node its own bump before the election returns."""
    r = SwitchRoles()
    r.connected(1)
    r.follow(1)
    assert r.lead(1) == [RoleRequest(1, MASTER, 1)]
    r.step_down()
    r.follow(3)
    with pytest.raises(ValueError, match="must grow"):
        r.lead(2)


def test_a_follower_takes_no_older_generation_and_a_leader_ignores_follow():
    r = SwitchRoles()
    r.connected(1)
    r.follow(5)
    r.follow(3)
    assert r.generation == 5
    r.lead(6)
    assert r.follow(9) == [] and r.generation == 6


def test_the_view_names_each_switchs_role():
    r, _ = _leader()
    r.reply(1, MASTER, 7)
    assert r.view()[1] == {"asked": "master", "role": "master", "generation": 7, "writable": True}
    assert r.view()[2]["writable"] is False
