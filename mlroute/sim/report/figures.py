"""The report's numbers: per-algorithm statistics and the Markdown tables, computed from the runs alone.

Shared by the prose (:mod:`.text`), which quotes them, and the plots (:mod:`.plots`), which group runs the same way.
"""

from __future__ import annotations

from collections import defaultdict

import numpy as np

from mlroute.tolerances import REL_TOL, REPORT_REL_TOL

ALGO_ORDER = ("mlroute", "greedy", "coloring", "annealing", "gff", "ecmp", "ilp")

#: Mean All-Reduce within this fraction of ilp's counts as "close to the optimum" in the ILP table and claims.
ILP_CLOSE = 0.01


def _algos(runs):
    present = {r["algo"] for r in runs}
    return [a for a in ALGO_ORDER if a in present] + sorted(present - set(ALGO_ORDER))


def _fmt(x, nd=3):
    if x is None or (isinstance(x, float) and not np.isfinite(x)):
        return "–"
    return f"{x:.{nd}f}"


def _table(header, rows):
    out = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    out += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return "\n".join(out)


def _cell(r):
    return (r["jobs"], r["ring"], r["failed"])


def _by_cell(runs):
    d = defaultdict(dict)
    for r in runs:
        d[_cell(r)][r["algo"]] = r
    return d


def _common_cells(runs, algos):
    byc = _by_cell(runs)
    return {c for c, d in byc.items() if all(a in d for a in algos)}


def _mean(xs):
    xs = [x for x in xs if x is not None]
    return float(np.mean(xs)) if xs else None


def _geo(xs):
    xs = [x for x in xs if x is not None and x > 0]
    return float(np.exp(np.mean(np.log(xs)))) if xs else None


def headline(runs):
    """Per algorithm, over the cells every non-ilp algorithm ran: mean / p99 / max of All-Reduce / ideal etc.
    (``ilp`` is included when it ran in all of those cells)."""
    algos = [a for a in _algos(runs) if a != "ilp"]
    common = _common_cells(runs, algos)
    if "ilp" in _algos(runs) and common <= _common_cells(runs, ["ilp"]):
        algos.append("ilp")
    rows = []
    stats = {}
    for a in algos:
        rs = [r for r in runs if r["algo"] == a and _cell(r) in common]
        allv = np.array([x for r in rs for x in r["norm_all"]])
        ms = np.array([x for r in rs for x in r["controller_ms"]])
        s = {
            "cells": len(rs),
            "norm_mean": float(allv.mean()),
            "norm_p99": float(np.percentile(allv, 99)),
            "norm_max": float(allv.max()),
            "fct_rel": None,
            "tput_mean": _mean([r["tput_mean_gbps"] for r in rs]),
            "ms_median": float(np.median(ms)),
            "ms_p99": float(np.percentile(ms, 99)),
            "load_max": max(r["max_link_load"] for r in rs),
            "load_min": min(r["max_link_load"] for r in rs),
        }
        stats[a] = s
    # FCT relative to mlroute (geometric mean of per-cell mean-FCT ratios)
    byc = _by_cell(runs)
    ref = "mlroute" if "mlroute" in algos else algos[0]
    for a in algos:
        stats[a]["fct_rel"] = _geo([byc[c][a]["fct_mean_s"] / byc[c][ref]["fct_mean_s"] for c in common])
    for a in algos:
        s = stats[a]
        rows.append([f"`{a}`", s["cells"], _fmt(s["norm_mean"]), _fmt(s["norm_p99"]), _fmt(s["norm_max"]),
                     _fmt(s["fct_rel"]), _fmt(s["tput_mean"], 1), _fmt(s["ms_median"], 2), _fmt(s["ms_p99"], 1),
                     f"{s['load_min']}–{s['load_max']}"])
    header = ["algorithm", "cells", "All-Reduce / ideal: mean", "p99", "max", f"mean FCT vs {ref} (geo-mean)",
              "throughput mean, Gb/s", "controller ms: median", "p99", "max link load (range over cells)"]
    return _table(header, rows), stats, common


def by_failures(runs, common):
    algos = [a for a in _algos(runs) if a != "ilp" or common <= _common_cells(runs, ["ilp"])]
    failed = sorted({c[2] for c in common})
    rows = []
    for a in algos:
        row = [f"`{a}`"]
        for f in failed:
            v = [x for r in runs if r["algo"] == a and _cell(r) in common and r["failed"] == f for x in r["norm_all"]]
            row.append(f"{_fmt(np.mean(v))} / {_fmt(np.percentile(v, 99))}")
        rows.append(row)
    return _table(["algorithm"] + [f"{f} failed: mean / p99" for f in failed], rows)


def by_cell_table(runs, failed, key="norm_mean"):
    algos = _algos(runs)
    byc = _by_cell(runs)
    cells = sorted(c for c in byc if c[2] == failed)
    rows = []
    for c in cells:
        d = byc[c]
        g = next(iter(d.values()))
        vals = {a: d[a][key] for a in algos if a in d}
        best = min(vals.values())
        row = [c[0], c[1], g["flows"], g["gpus_per_host"]]
        for a in algos:
            if a in vals:
                cell = _fmt(vals[a])
                row.append(f"**{cell}**" if vals[a] <= best * (1 + REL_TOL) else cell)
            else:
                row.append("–")
        rows.append(row)
    return _table(["jobs", "ring", "flows", "GPUs/NIC"] + [f"`{a}`" for a in algos], rows)


def ilp_table(runs, time_limit=None):
    byc = _by_cell(runs)
    cells = sorted(c for c, d in byc.items() if "ilp" in d)
    if not cells:
        return None, {}
    algos = [a for a in _algos(runs) if a != "ilp"]
    rows = []
    ratios = {}
    for a in algos:
        rm = [byc[c][a]["norm_mean"] / byc[c]["ilp"]["norm_mean"] for c in cells if a in byc[c]]
        rp = [byc[c][a]["norm_p99"] / byc[c]["ilp"]["norm_p99"] for c in cells if a in byc[c]]
        lw = [byc[c][a]["max_link_load"] - byc[c]["ilp"]["max_link_load"] for c in cells if a in byc[c]]
        ratios[a] = {"mean": _geo(rm), "worst": max(rm) if rm else None, "n": len(rm),
                     "within1": sum(1 for x in rm if x <= 1 + ILP_CLOSE)}
        rows.append([f"`{a}`", len(rm), _fmt(_geo(rm)), _fmt(max(rm) if rm else None), _fmt(_geo(rp)),
                     f"{sum(1 for x in rm if x <= 1 + ILP_CLOSE)}/{len(rm)}", f"{min(lw)}..{max(lw)}" if lw else "–"])
    t = _table(["algorithm", "cells", "mean All-Reduce vs ilp (geo-mean ratio)", "worst ratio", "p99 ratio",
                f"cells within {100 * ILP_CLOSE:g} % of ilp", "max link load − ilp's"], rows)
    limited = []
    for c in cells:
        r = byc[c]["ilp"]
        # solves that ran into the time limit returned an unproven incumbent (older results lack "unproved":
        # a runtime at the limit says the same)
        n = r.get("unproved")
        if n is None:
            lim = r.get("ilp_time_limit_s", time_limit)
            n = sum(1 for ms in r["controller_ms"] if lim and ms >= 0.95 * lim * 1e3)
        if n:
            limited.append((c, n, len(r["controller_ms"]), r["max_link_load"]))
    if limited:
        t += ("\n\n`ilp` is *not* the optimum everywhere: in " + "; ".join(
            f"{c[0]} jobs × ring {c[1]}, {c[2]} failed ({n} of {m} solves, max link load {ld})"
            for c, n, m, ld in limited)
            + " some solves ran into the time limit and returned an unproven incumbent (only the probe over all "
              "of the cell's flows had to prove optimality). A negative load difference above comes from such "
              "solves.")
    return t, ratios


def largest_table(runs, cfg):
    big = (max(cfg["jobs"]), max(cfg["rings"]))
    rows = []
    for f in cfg["failed"]:
        for a in _algos(runs):
            r = next((x for x in runs if (x["jobs"], x["ring"], x["failed"]) == (*big, f) and x["algo"] == a), None)
            if r is None:
                continue
            rows.append([f, f"`{a}`", r["flows"], r["gpus_per_host"], _fmt(r["norm_mean"]), _fmt(r["norm_p99"]),
                         r["max_link_load"], _fmt(r["controller_ms_median"], 2), _fmt(r["controller_ms_max"], 1),
                         len(r["controller_ms"]), _fmt(r["wall_s"], 1)])
    return _table(["failed", "algorithm", "flows", "GPUs/NIC", "All-Reduce/ideal mean", "p99", "max link load",
                   "controller ms median", "max", "recomputations", "simulation wall s"], rows), big


def mlroute_vs(runs, other="greedy"):
    byc = _by_cell(runs)
    better = equal = worse = 0
    gains, losses = [], []
    for d in byc.values():
        if "mlroute" in d and other in d:
            m, g = d["mlroute"]["norm_mean"], d[other]["norm_mean"]
            if m < g * (1 - REPORT_REL_TOL):
                better += 1
                gains.append(1 - m / g)
            elif m > g * (1 + REPORT_REL_TOL):
                worse += 1
                losses.append(m / g - 1)
            else:
                equal += 1
    return {"better": better, "equal": equal, "worse": worse,
            "gain_mean": float(np.mean(gains)) if gains else 0.0, "gain_max": max(gains, default=0.0),
            "loss_max": max(losses, default=0.0), "n": better + equal + worse}
