"""The project's own flow-file format (YAML or CSV): one flow per entry, hosts numbered from 0.

YAML (``.yaml`` / ``.yml``)::

    flows:                     # or the list itself at the top level
      - {src: 0, dst: 37}
      - {src: 1, dst: 38, demand: 0.5, job: llama}

CSV (``.csv``), a header line naming the columns (``src`` and ``dst`` required, ``demand`` and ``job``
optional, any order), ``#`` comments and blank lines ignored::

    src,dst,demand,job
    0,37,,gpt
    1,38,0.5,gpt

``src`` / ``dst`` are host ids: integers are kept as integers, anything else as strings (``Fabric.clos``
puts host h under ToR h // hosts_per_tor).  ``demand`` is a fraction of host-link capacity in (0, 1]
(empty = unlimited), ``job`` any name.  Errors name the file and line: ``flows.csv:7: demand must be a
number in (0, 1], not 'x'``.
"""

from __future__ import annotations

import csv
import io
from pathlib import Path

import yaml

from mlroute.errors import MlrouteError
from mlroute.routing.flow import Flow

FIELDS = ("src", "dst", "demand", "job")
SUFFIXES = (".yaml", ".yml", ".csv")


class FlowFileError(MlrouteError, ValueError):
    """A malformed flow file; the message starts with ``file:line:``."""


def is_flow_file(path) -> bool:
    return Path(str(path)).suffix.lower() in SUFFIXES


def _host(value, where: str):
    if isinstance(value, bool) or value is None:
        raise FlowFileError(f"{where}: host id must be an integer or a name, not {value!r}")
    if isinstance(value, int):
        if value < 0:
            raise FlowFileError(f"{where}: host id must be >= 0, not {value}")
        return value
    if isinstance(value, float):
        raise FlowFileError(f"{where}: host id must be an integer or a name, not {value!r}")
    text = str(value).strip()
    if not text:
        raise FlowFileError(f"{where}: empty host id")
    try:
        n = int(text)
    except ValueError:
        return text
    if n < 0:
        raise FlowFileError(f"{where}: host id must be >= 0, not {n}")
    return n


def _demand(value, where: str):
    if value is None or (isinstance(value, str) and not value.strip()):
        return None
    try:
        d = float(value)
    except (TypeError, ValueError):
        raise FlowFileError(f"{where}: demand must be a number in (0, 1], not {value!r}") from None
    if not 0 < d <= 1:
        raise FlowFileError(f"{where}: demand must be a number in (0, 1], not {value!r}")
    return d


def _job(value):
    if value is None or (isinstance(value, str) and not value.strip()):
        return None
    return str(value).strip()


def _flow(entry: dict, where: str) -> Flow:
    unknown = [k for k in entry if k not in FIELDS]
    if unknown:
        raise FlowFileError(f"{where}: unknown field {unknown[0]!r} (fields: {', '.join(FIELDS)})")
    for k in ("src", "dst"):
        if k not in entry or entry[k] is None or (isinstance(entry[k], str) and not entry[k].strip()):
            raise FlowFileError(f"{where}: missing {k}")
    return Flow(_host(entry["src"], where), _host(entry["dst"], where),
                demand=_demand(entry.get("demand"), where), job=_job(entry.get("job")))


def _read_csv(text: str, name: str) -> tuple[list, list]:
    flows, origins = [], []
    header = None
    for lineno, line in enumerate(text.splitlines(), 1):
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        where = f"{name}:{lineno}"
        try:
            cells = next(csv.reader(io.StringIO(line)))
        except (csv.Error, StopIteration) as exc:
            raise FlowFileError(f"{where}: malformed CSV line ({exc})") from None
        cells = [c.strip() for c in cells]
        if header is None:
            header = [c.lower() for c in cells]
            bad = [c for c in header if c not in FIELDS]
            if bad:
                raise FlowFileError(f"{where}: unknown column {bad[0]!r} in the header (columns: {', '.join(FIELDS)})")
            if "src" not in header or "dst" not in header:
                raise FlowFileError(f"{where}: the header must name the columns src and dst")
            if len(set(header)) != len(header):
                raise FlowFileError(f"{where}: a column is named twice in the header")
            continue
        if len(cells) != len(header):
            raise FlowFileError(f"{where}: {len(cells)} field{'s' if len(cells) != 1 else ''}, the header has "
                                 f"{len(header)}")
        flows.append(_flow(dict(zip(header, cells)), where))
        origins.append(where)
    if header is None:
        raise FlowFileError(f"{name}:1: empty flow file (no header line)")
    return flows, origins


def _read_yaml(text: str, name: str) -> tuple[list, list]:
    loader = yaml.SafeLoader(text)
    try:
        node = loader.get_single_node()
        if node is None:
            raise FlowFileError(f"{name}:1: empty flow file")
        data = loader.construct_document(node)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = mark.line + 1 if mark is not None else 1
        raise FlowFileError(f"{name}:{line}: malformed YAML ({getattr(exc, 'problem', None) or exc})") from None
    finally:
        loader.dispose()
    items_node, items = node, data
    if isinstance(data, dict):
        if set(data) != {"flows"}:
            extra = sorted(str(k) for k in data if k != "flows")
            what = f"unknown key {extra[0]!r}" if extra else "missing key 'flows'"
            raise FlowFileError(f"{name}:{node.start_mark.line + 1}: {what} (expected a top-level 'flows' list)")
        items = data["flows"]
        items_node = next(v for k, v in node.value if k.value == "flows")
    if not isinstance(items, list):
        raise FlowFileError(f"{name}:{items_node.start_mark.line + 1}: expected a list of flows")
    flows, origins = [], []
    for entry, enode in zip(items, items_node.value):
        where = f"{name}:{enode.start_mark.line + 1}"
        if not isinstance(entry, dict):
            raise FlowFileError(f"{where}: a flow must be a mapping with src and dst, not {entry!r}")
        flows.append(_flow(entry, where))
        origins.append(where)
    return flows, origins


def read_flow_file_with_origins(path) -> tuple[list[Flow], list[str]]:
    """Flows of a project flow file and, for each, ``"file:line"`` where it was written."""
    p = Path(str(path))
    name = str(path)
    try:
        text = p.read_text()
    except OSError as exc:
        raise FlowFileError(f"{name}:0: cannot read ({exc.strerror})") from None
    if p.suffix.lower() == ".csv":
        return _read_csv(text, name)
    if p.suffix.lower() in (".yaml", ".yml"):
        return _read_yaml(text, name)
    raise FlowFileError(f"{name}:0: unknown flow-file type (use .yaml, .yml or .csv)")


def read_flow_file(path) -> list[Flow]:
    return read_flow_file_with_origins(path)[0]


def write_flow_file(path, flows) -> None:
    """Write flows in the project format (CSV or YAML by suffix)."""
    p = Path(str(path))
    rows = [{"src": f.src, "dst": f.dst, **({"demand": f.demand} if f.demand is not None else {}),
             **({"job": f.job} if f.job is not None else {})} for f in flows]
    if p.suffix.lower() == ".csv":
        buf = io.StringIO()
        w = csv.writer(buf, lineterminator="\n")
        w.writerow(FIELDS)
        for r in rows:
            w.writerow([r["src"], r["dst"], r.get("demand", ""), r.get("job", "")])
        p.write_text(buf.getvalue())
    else:
        p.write_text(yaml.safe_dump({"flows": rows}, sort_keys=False))
