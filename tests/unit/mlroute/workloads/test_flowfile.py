"""The project's flow-file format (YAML / CSV): parsing, host ids as given, errors naming file and line."""

from __future__ import annotations

import pytest

from mlroute.routing.flow import Flow
from mlroute.workloads.flowfile import (
    FlowFileError,
    is_flow_file,
    read_flow_file,
    read_flow_file_with_origins,
    write_flow_file,
)


def test_yaml_both_layouts(tmp_path):
    p = tmp_path / "f.yaml"
    p.write_text("flows:\n  - {src: 0, dst: 5}\n  - {src: h1, dst: 7, demand: 0.5, job: llama}\n")
    flows, origins = read_flow_file_with_origins(p)
    assert flows == [Flow(0, 5), Flow("h1", 7, demand=0.5, job="llama")]
    assert origins == [f"{p}:2", f"{p}:3"]
    q = tmp_path / "g.yml"
    q.write_text("- src: 1\n  dst: 2\n- src: '3'\n  dst: 4\n")
    assert read_flow_file(q) == [Flow(1, 2), Flow(3, 4)]


def test_csv_any_column_order(tmp_path):
    p = tmp_path / "f.csv"
    p.write_text("# comment\njob,dst,src,demand\n\ngpt,37,0,\ngpt,38,1,0.25\n")
    assert read_flow_file(p) == [Flow(0, 37, job="gpt"), Flow(1, 38, demand=0.25, job="gpt")]


@pytest.mark.parametrize("name,text,where,what", [
    ("a.csv", "src,dst\n0,1\n2\n", 3, "1 field, the header has 2"),
    ("a.csv", "src,dst,demand\n0,1,2\n", 2, "demand"),
    ("a.csv", "src,dst,demand\n0,1,x\n", 2, "demand"),
    ("a.csv", "src,port\n0,1\n", 1, "unknown column"),
    ("a.csv", "src,dst\n,1\n", 2, "missing src"),
    ("a.csv", "src,dst\n-1,1\n", 2, ">= 0"),
    ("a.csv", "", 1, "empty"),
    ("a.yaml", "flows:\n  - {src: 0}\n", 2, "missing dst"),
    ("a.yaml", "flows:\n  - {src: 0, dst: 1}\n  - {src: 0, dst: 1, weight: 3}\n", 3, "unknown field"),
    ("a.yaml", "flows:\n  - [0, 1]\n", 2, "mapping"),
    ("a.yaml", "flows: [\n", 2, "malformed YAML"),
    ("a.yaml", "routes: []\n", 1, "unknown key"),
    ("a.yaml", "flows:\n  - {src: 1.5, dst: 1}\n", 2, "host id"),
])
def test_errors_name_file_and_line(tmp_path, name, text, where, what):
    p = tmp_path / name
    p.write_text(text)
    with pytest.raises(FlowFileError) as exc:
        read_flow_file(p)
    msg = str(exc.value)
    assert msg.startswith(f"{p}:{where}:"), msg
    assert what in msg


@pytest.mark.parametrize("suffix", [".csv", ".yaml"])
def test_round_trip(tmp_path, suffix):
    flows = [Flow(0, 5), Flow(3, "h9", demand=0.5), Flow(2, 1, job="j")]
    p = tmp_path / f"rt{suffix}"
    write_flow_file(p, flows)
    assert read_flow_file(p) == flows
    assert is_flow_file(p) and not is_flow_file(tmp_path / "job0.txt")
