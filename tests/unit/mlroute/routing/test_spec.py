"""One fabric/failure syntax for `mlroute route` and `mlroute simulate` (mlroute.routing.spec)."""

from __future__ import annotations

import json

import pytest

from mlroute.cli import main
from mlroute.routing import spec
from mlroute.routing.fabric import FabricError


def test_index_lists_take_ranges_and_reject_junk():
    assert spec.parse_index_list("28-31,3", "x") == [28, 29, 30, 31, 3]
    assert spec.parse_index_list(None, "x") == []
    for bad in ("1-", "a", "3-1", "1.5"):
        with pytest.raises(FabricError, match="not an integer or a range"):
            spec.parse_index_list(bad, "--failed-spines")


def test_links_have_one_syntax():
    assert spec.parse_links("tor0:spine3") == [("tor0", "spine3")]
    assert spec.format_link("tor0", "spine3") == "tor0:spine3"
    assert spec.parse_links(spec.format_link("edge0_1", "agg0_0")) == [("edge0_1", "agg0_0")]
    with pytest.raises(FabricError, match=r"'tor0-spine3' is not of the form SWITCH:SWITCH \(e.g. tor0:spine3\)"):
        spec.parse_links("tor0-spine3")
    with pytest.raises(FabricError, match="not of the form"):
        spec.parse_links("tor0:")


def test_top_switches_by_index_or_name_and_partition():
    fab = spec.build_fabric("fattree", None, None, None, 4)
    assert spec.top_switches(fab, [0, "core3"]) == ["core0", "core3"]
    with pytest.raises(FabricError, match=r"core 4 is not in the fabric \(cores are numbered 0..3\)"):
        spec.top_switches(fab, [4])
    with pytest.raises(FabricError, match="failing all 4 cores partitions the fabric"):
        spec.top_switches(fab, [0, 1, 2, 3])
    with pytest.raises(FabricError, match="there is no link tor0:spine0"):
        spec.check_links(fab, [("tor0", "spine0")])
    with pytest.raises(FabricError, match="--k must be an even integer"):
        spec.build_fabric("fattree", None, None, None, 3)
    with pytest.raises(FabricError, match="--spines must be a positive integer"):
        spec.build_fabric("clos", 2, 0, 1)


def _route(capsys, *argv):
    rc = main(["route", "--tors", "4", "--spines", "4", "--hosts-per-tor", "2", "--pattern", "randbij",
               "--algo", "greedy", "--json", *argv])
    out, err = capsys.readouterr()
    return rc, out, err


def test_route_takes_the_simulate_syntax(capsys):
    rc, out, err = _route(capsys, "--failed-spines", "2-3", "--failed-links", "tor0:spine1")
    assert rc == 0, err
    d = json.loads(out)
    assert d["fabric"]["failed_switches"] == ["spine2", "spine3"]
    assert d["fabric"]["failed_links"] == ["spine1:tor0"]
    for r in d["routes"]:
        assert r["path"] is None or not {"spine2", "spine3"} & set(r["path"])
        if r["path"] and r["path"][0] == "tor0" and len(r["path"]) == 3:
            assert r["path"][1] == "spine0"  # spine1's cable to tor0 and spines 2-3 are down


@pytest.mark.parametrize("argv, message", [
    (["--failed-links", "tor0-spine1"], "not of the form SWITCH:SWITCH"),
    (["--failed-links", "tor0:tor1"], "no link tor0:tor1"),
    (["--failed-spines", "0-3"], "partitions the fabric"),
    (["--failed-spines", "4"], "spine 4 is not in the fabric"),
])
def test_route_rejects_what_simulate_rejects(capsys, argv, message):
    rc, _, err = _route(capsys, *argv)
    assert rc == 2 and message in err and err.startswith("mlroute route: error:")
