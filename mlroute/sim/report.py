"""The reproduction report: Markdown tables and matplotlib (Agg) plots from ``results.json``.

Every number in the report is computed here from the simulation results; nothing is typed in by hand.
"""

from __future__ import annotations

import json
import os
from collections import defaultdict

import numpy as np

from mlroute.tolerances import REL_TOL, REPORT_REL_TOL

ALGO_ORDER = ("mlroute", "greedy", "coloring", "annealing", "gff", "ecmp", "ilp")
COLOURS = {"mlroute": "#d62728", "greedy": "#1f77b4", "coloring": "#2ca02c", "annealing": "#9467bd",
           "gff": "#8c564b", "ecmp": "#7f7f7f", "ilp": "#ff7f0e"}


# overlapping curves (equal results are common) stay visible: the project's algorithm thick and solid, the rest
# thinner and dashed/dotted
STYLES = {"mlroute": ("-", 3.0), "greedy": ("--", 1.8), "coloring": (":", 1.8), "annealing": ("-", 1.2),
          "gff": ("-.", 1.4), "ecmp": ("-", 1.2), "ilp": ((0, (1, 3)), 2.2)}


def _style(a):
    ls, lw = STYLES.get(a, ("-", 1.3))
    return {"color": COLOURS.get(a), "linestyle": ls, "linewidth": lw}


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


# ---------------------------------------------------------------------------------------------------- plots


def _plt():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def plot_grid_metric(runs, cfg, key, ylabel, path):
    plt = _plt()
    algos = _algos(runs)
    rings, failed = cfg["rings"], cfg["failed"]
    fig, axes = plt.subplots(len(failed), len(rings), figsize=(max(4.2 * len(rings), 7.5), 2.9 * len(failed)),
                             sharex=True, squeeze=False)
    for i, f in enumerate(failed):
        for k, ring in enumerate(rings):
            ax = axes[i][k]
            for a in algos:
                pts = sorted((r["jobs"], r[key]) for r in runs if r["algo"] == a and r["ring"] == ring
                             and r["failed"] == f)
                if pts:
                    ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", ms=3, label=a, **_style(a))
            ax.set_title(f"ring {ring}, {f} failed spine{'s' if f != 1 else ''}", fontsize=9)
            ax.grid(alpha=0.3)
            if k == 0:
                ax.set_ylabel(ylabel, fontsize=8)
            if i == len(failed) - 1:
                ax.set_xlabel("concurrent jobs", fontsize=8)
            ax.set_xticks(cfg["jobs"])
    handles, labels = axes[0][0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="upper center", ncol=len(algos), fontsize=8, frameon=False)
    fig.tight_layout(rect=(0, 0, 1, 0.96))
    fig.savefig(path, dpi=110)
    plt.close(fig)


def _ecdf(ax, values, label, colour, weights_from_quantiles=False):
    v = np.sort(np.asarray(values, dtype=float))
    if not len(v):
        return
    y = np.arange(1, len(v) + 1) / len(v)
    ax.step(v, y, where="post", label=label, **_style(label))


def plot_cdf_allreduce(runs, path):
    plt = _plt()
    algos = _algos(runs)
    fig, axes = plt.subplots(1, 2, figsize=(11, 3.8))
    common = _common_cells(runs, [a for a in algos if a != "ilp"])
    for a in algos:
        if a == "ilp":
            continue
        vals = [x for r in runs if r["algo"] == a and _cell(r) in common for x in r["norm_all"]]
        _ecdf(axes[0], vals, a, COLOURS.get(a))
    axes[0].set_title("All cells without ilp: All-Reduce time / ideal, every (job, iteration)", fontsize=9)
    ilp_cells = {_cell(r) for r in runs if r["algo"] == "ilp"}
    for a in algos:
        vals = [x for r in runs if r["algo"] == a and _cell(r) in ilp_cells for x in r["norm_all"]]
        _ecdf(axes[1], vals, a, COLOURS.get(a))
    axes[1].set_title(f"The {len(ilp_cells)} cells where ilp finished", fontsize=9)
    for ax in axes:
        ax.set_xscale("log")
        ax.set_xlabel("All-Reduce time / uncontended ideal (log)")
        ax.set_ylabel("CDF")
        ax.grid(alpha=0.3, which="both")
        if ax.get_legend_handles_labels()[0]:
            ax.legend(fontsize=7)
        else:
            ax.text(0.5, 0.5, "no runs", ha="center", va="center", transform=ax.transAxes)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def plot_cdf_quantiles(runs, cells, key, xlabel, path, log=True):
    """CDFs (from the stored quantiles of every transfer) of the given cells, one panel each."""
    plt = _plt()
    algos = _algos(runs)
    byc = _by_cell(runs)
    cells = [c for c in cells if c in byc]
    if not cells:
        return False
    fig, axes = plt.subplots(1, len(cells), figsize=(5.5 * len(cells), 3.8), squeeze=False)
    for ax, c in zip(axes[0], cells):
        for a in algos:
            r = byc[c].get(a)
            if r and r[key]:
                q = np.asarray(r[key])
                ax.plot(q, np.linspace(0, 1, len(q)), label=a, **_style(a))
        ax.set_title(f"{c[0]} jobs, ring {c[1]}, {c[2]} failed spines", fontsize=9)
        if log:
            ax.set_xscale("log")
        ax.set_xlabel(xlabel)
        ax.set_ylabel("CDF over transfers")
        ax.grid(alpha=0.3, which="both")
        ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return True


def plot_runtime(runs, path):
    plt = _plt()
    algos = _algos(runs)
    fig, ax = plt.subplots(figsize=(7.5, 4.5))
    for a in algos:
        pts = defaultdict(list)
        for r in runs:
            if r["algo"] == a:
                for n, ms in zip(r["recompute_flows"], r["controller_ms"]):
                    pts[n].append(ms)
        if not pts:
            continue
        xs = sorted(pts)
        med = [float(np.median(pts[x])) for x in xs]
        ax.scatter(xs, med, s=8, color=COLOURS.get(a), alpha=0.5)
        # median per size bucket (powers of 2) as a line
        buckets = defaultdict(list)
        for x in xs:
            buckets[int(2 ** round(np.log2(x)))].extend(pts[x])
        bx = sorted(buckets)
        ax.plot(bx, [np.median(buckets[b]) for b in bx], color=COLOURS.get(a), lw=1.5, label=a)
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("flows routed in one recomputation")
    ax.set_ylabel("optimiser runtime, ms (median, log)")
    ax.set_title("Controller (optimiser) runtime against scale, this machine", fontsize=9)
    ax.grid(alpha=0.3, which="both")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


# ---------------------------------------------------------------------------------------------------- tables


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


# ---------------------------------------------------------------------------------------------------- prose

#: What the paper claims (docs/paper.md), quoted next to what a run measured; the only numbers the report does
#: not compute, because they are the paper's.
PAPER_CLAIMS = {"greedy_ms": "≈10 ms", "ecmp_worst_link": "4–8"}

#: Mean All-Reduce within this fraction of ilp's counts as "close to the optimum" in the ILP table and claims.
ILP_CLOSE = 0.01

#: Every sentence of the report that carries a number, in one place: ``str.format`` templates whose fields are
#: all computed from the results (:func:`_say`). Headings and tables are built where they are used.
TEXT = {
    "generated": "Generated by {cmd} ({label} grid) in {minutes:.1f} min on {cpus} CPUs (Python {python}){commit}"
                 "{sweep}. "
                 "Every number below is computed by `mlroute/sim/report.py` from `results.json` in this directory; "
                 "the model is described in [docs/simulation.md](../simulation.md) and the paper's claims in "
                 "[docs/paper.md](../paper.md).\n",
    "fabric": "- Fabric: 2-tier Clos, {tors} ToRs × {spines} spines × {hosts_per_tor} hosts per ToR, {gbps:g} Gb/s "
              "links (host NICs included), {oversub}.",
    "grid": "- Grid: {jobs} concurrent jobs × ring (data-parallel degree) {rings} × {failed} failed spines (the last "
            "ones, failed from t = 0) × algorithms {algos}; {iterations} iterations per job; {n_runs} simulations.",
    "workload": "- Workload: `paper_jobs` (models {models}, job j trains model j mod {n_models}; TP·PP rings per "
                "job; per-step bytes {bpp}·params/(TP·PP)/n; start uniform in [{start_min:g}, {start_max:g}] s), "
                "seed {seed} + 100·jobs + ring, the same workload for every algorithm and failure count.",
    "packed": "- **Deviation:** one GPU per host NIC does not fit the fabric for {cells} (each replica gets ToRs of "
              "its own; these need {need} of the {tors} ToRs). Those cells pack {packing} (rings of GPUs on one "
              "host share its NIC; the ideal below accounts for it), so their absolute times are not comparable "
              "with the 1-GPU cells, only their ratios to the ideal are.",
    "short": "- **Deviation:** {iterations} iterations per job (paper: ~{paper_iterations}); grid '{label}'.",
    "controller": "- Controller: forward-looking — the routing of all flows of all running jobs is recomputed at "
                  "the start of every job iteration (its compute phase) and applied at once; the optimiser's "
                  "wall-clock runtime on this machine is recorded, not simulated.",
    "ideal": "- **Ideal** = the job's communication time alone on a non-blocking fabric (only its NICs limit it): "
             "2(n−1)·S/rate for a ring. The normalised All-Reduce time of a (job, iteration) is its simulated "
             "All-Reduce time divided by that; 1.0 is perfect.",
    "ilp_skips": "- `ilp` ran where one solve over all of a cell's flows proved optimality within {limit:g} s; it "
                 "was skipped in {n} cells (listed at the end).",
    "headline": "Over the {n} cells where every algorithm{but_ilp} ran (All-Reduce statistics pooled over every "
                "job iteration of every cell; controller runtime over every recomputation):\n",
    "vs_greedy": "`mlroute` against the paper's `greedy`, cell by cell (mean normalised All-Reduce time): better in "
                 "{better}, equal in {equal}, worse in {worse} of {n} cells; where better, by {gain:.1f} % on "
                 "average (at most {gain_max:.1f} %){loss}.\n",
    "vs_other": "`mlroute` against `greedy`, cell by cell: better in {better}, equal in {equal}, worse in {worse} of "
                "{n} cells; where better, by {gain:.1f} % on average (at most {gain_max:.1f} %){loss}.\n",
    "loss": "; where worse, by at most {loss_max:.1f} %",
    "largest": "### The paper's largest case: {jobs} jobs × ring {ring}\n",
    "per_cell": "### Mean All-Reduce / ideal per cell, {f} failed spine{s} (best in bold)\n",
    "plot_cdfs": "- CDFs of transfer FCT and throughput in the largest case ({jobs} jobs, ring {ring}): "
                 "![fct](cdf_fct.png) ![tput](cdf_throughput.png)",
    # the paper's claims
    "c_ilp": "- *\"The greedy's All-Reduce time is close to the ILP optimum.\"* On the {n} cells where `ilp` "
             "finished, `greedy`'s mean All-Reduce time is {mean:.3f}× `ilp`'s (geometric mean; worst cell "
             "{worst:.3f}×), within {close:g} % in {within} of {n} cells.{mlroute}",
    "c_ilp_mlroute": " `mlroute`: {mean:.3f}× (worst {worst:.3f}×).",
    "c_no_ilp": "- *\"Close to the ILP optimum\"*: not checked — `ilp` did not finish in any cell.",
    "c_fct": "- *\"Its FCT / throughput are sometimes slightly worse than the best alternative.\"* Mean FCT "
             "relative to `mlroute` (geometric mean over cells): `greedy` {g_fct:.3f}, best alternative `{best}` "
             "{best_fct:.3f}; mean transfer throughput `greedy` {g_tput:.1f} Gb/s vs {others}.",
    "c_runtime": "- *\"{paper_ms} runtime versus computation-heavy alternatives.\"* Median optimiser runtime per "
                 "recomputation on this machine: `greedy` {g_ms:.2f} ms (p99 {g_p99:.1f} ms){heavy}{mlroute}{ilp}.",
    "c_failures": "- *\"Robust under spine failures.\"* `greedy`'s pooled mean All-Reduce / ideal goes {greedy} for "
                  "{fails} failed spines{others}.",
    "c_ecmp": "- *\"ECMP puts {paper_worst} elephants on its worst link.\"* Here `ecmp`'s worst link carries "
              "{lo}–{hi} elephants (median {median}) across the cells, and its mean All-Reduce time is "
              "{mean:.2f}× ideal (p99 {p99:.2f}×).",
    "c_vs": "- *`mlroute` against the paper's greedy*: better in {better} of {n} cells (by {gain:.1f} % on average, "
            "at most {gain_max:.1f} %), equal in {equal}, worse in {worse}{loss}.",
    # random placement
    "x_intro": "The paper's placement gives every replica ToRs of its own, so every ToR sends and receives at most "
               "one flow per host and the ToR-level multigraph is very regular. Here the same jobs ({jobs} jobs × "
               "ring {rings}, {failed} failed spines, {iterations} iterations, seed {seed} + 100·jobs + ring) put "
               "every host of every replica on a host drawn uniformly at random from the whole fabric "
               "(`--placement random`): jobs share ToRs, ToR degrees vary, some ring edges stay inside a ToR. "
               "{n_runs} simulations with {algos}{left_out}.\n",
    "x_left_out": " (`ecmp` and `annealing` are left out here: with random placement the flow–link graph is one "
                  "big component, and their many uneven rates make each run far slower on this machine; they are "
                  "load-oblivious or near-random on the paper grid anyway)",
    "x_beaten": "`mlroute` is not the best everywhere: another algorithm has a shorter mean All-Reduce in {n} "
                "cell{s} ({cells}). Its objective is the flow-level leximin of rates, not the job-level All-Reduce "
                "time, so it can lose to a routing that happens to concentrate its slow flows in fewer rings (a "
                "job waits only for its slowest ring).\n",
    "x_beaten_cell": "{jobs} jobs, {failed} failed: `{algo}` {v:.3f} vs `mlroute` {m:.3f}",
    "x_per_cell": "Mean All-Reduce / ideal per cell, random placement, {f} failed spine{s}:\n",
    # discussion
    "d_optimal": "- **On the paper's grid the greedy is already optimal.** Its max link load equals the ILP's "
                 "proven optimum in all {n} cells where `ilp` ran. With the paper's placement every replica owns "
                 "its ToRs, so each ToR sends (and receives) one flow per GPU on it — at most hosts-per-ToR × "
                 "GPUs-per-NIC — spread over the other replicas' ToRs: the ToR-level multigraph is nearly regular, "
                 "and placing flows largest group first, on the least-loaded spine, never gets stuck. The "
                 "2-approximation gap needs uneven degrees and unlucky orders, which this workload does not "
                 "produce, so `mlroute` (which starts from the greedy and keeps it unless the metric improves) "
                 "cannot do better in max load, and the All-Reduce times come out equal.",
    "d_not_optimal": "- **The greedy against the optimum.** Its max link load equals the ILP's proven optimum in "
                     "{same} of {n} cells; in the others it is above it (the 2-approximation at work).",
    "d_ilp_worse": "- **Optimal max load is not optimal All-Reduce.** In {worse} of {n} cells `ilp` — optimal in max "
                   "link load, by proof — has a *longer* mean All-Reduce time than the greedy: the ILP only "
                   "minimises the most loaded link and is indifferent to how many links sit at that level, so its "
                   "solver may leave more rings on a doubly-loaded link. This is the gap the paper's 2-layered "
                   "metric (and `mlroute`'s local search on the sorted load vector) addresses.",
    "d_failures": "- **Why failures cost about {floor}× for every good algorithm.** With one GPU per NIC a full ToR "
                  "sends {hosts_per_tor} flows; with {live} live spines some uplink must carry {floor} of them, and "
                  "the ring that crosses it runs its steps at 1/{floor} of the NIC rate; a job waits for its slowest "
                  "ring. So about {floor} is a floor no routing can beat in these cells (`ilp` proves the max "
                  "load), and the load-aware algorithms reach it: `mlroute`/`greedy` mean All-Reduce / ideal in "
                  "these cells {lo:.3f}–{hi:.3f}. Confining the doubled links to fewer jobs would take a job-aware "
                  "placement or scheduler; routing alone cannot, because every job has a full ToR.",
    "d_random_wins": "- **Where `mlroute` wins: irregular traffic.** With random host placement (supplementary grid) "
                     "`mlroute` is better than `greedy` in {better} of {n} cells, by {gain:.1f} % on average and up "
                     "to {gain_max:.1f} %, and worse in {worse}. There ToR degrees vary and jobs share ToRs; the "
                     "greedy places flow by flow and can reach twice the optimal max load (its proven bound), while "
                     "`mlroute`'s König-colouring repair reaches ⌈Δ/S⌉ and its local search then lowers the number "
                     "of flows at the bottleneck.",
    "d_random_same": "- **Random placement** did not separate `mlroute` from `greedy` either ({equal} of {n} cells "
                     "equal, {worse} worse).",
    "d_annealing": "- **Annealing** (the paper's variant: a spine per destination host, swap moves, {steps} steps) "
                   "stays close to its random start at this scale (max link load {lo}–{hi}): {steps} swaps cannot "
                   "repair thousands of random choices (and a swap only exchanges two destinations' spines, never "
                   "changes how many destinations use each). The paper uses it as a slow baseline and so do we.",
    "d_fct_misleads": "- **Mean FCT can mislead for synchronous jobs.** `ecmp` has a *lower* mean transfer FCT than "
                      "`mlroute` in {lower} of {n} cells although its All-Reduce is several times slower: where "
                      "GPUs share a NIC, a flow that dodges the collisions gets more than its NIC share while its "
                      "NIC-mates are stuck behind a hot link, and finishes early — but its ring still waits for the "
                      "slowest edge. This is a plausible reason for the paper's remark that the greedy's FCT / "
                      "throughput is sometimes slightly worse than an alternative's.",
    "d_fct": "- **FCT.** `ecmp`'s mean transfer FCT is higher than `mlroute`'s in every cell here{packed}.",
    "d_runtime": "- **Controller runtime.** All the load-aware algorithms except `ilp` and `annealing` recompute a "
                 "paper-scale routing in milliseconds to tens of milliseconds in pure Python here (the paper's "
                 "{paper_ms} is for the greedy); each recomputation happens during a compute phase of ≥ "
                 "{compute_s:g} s, so none of them delays training. `ilp` takes seconds; it would only fit a "
                 "forward-looking controller because the compute phases are long.",
}


def _say(key: str, **values) -> str:
    return TEXT[key].format(**values)


def _plural(n: int) -> str:
    return "" if n == 1 else "s"


def _span(values) -> str:
    """``a–b`` of some numbers, or ``a`` when they are all equal."""
    lo, hi = min(values), max(values)
    return f"{lo}" if lo == hi else f"{lo}–{hi}"


def _ticks(xs) -> str:
    return ", ".join(f"`{x}`" for x in xs)


def _loss(vs: dict) -> str:
    return _say("loss", loss_max=100 * vs["loss_max"]) if vs["worse"] else ""


def _vs_values(vs: dict) -> dict:
    return dict(better=vs["better"], equal=vs["equal"], worse=vs["worse"], n=vs["n"], gain=100 * vs["gain_mean"],
                gain_max=100 * vs["gain_max"], loss=_loss(vs))


# ---------------------------------------------------------------------------------------------------- report


def write_report(results: dict, out_dir: str, *, command: str = "mlroute reproduce --out DIR") -> str:
    runs = results["runs"]
    cfg = results["config"]
    os.makedirs(out_dir, exist_ok=True)
    big = (max(cfg["jobs"]), max(cfg["rings"]))
    _write_plots(runs, cfg, big, out_dir)
    head, stats, common = headline(runs)
    ilp_t, ilp_r = ilp_table(runs, cfg.get("ilp_time_limit"))
    large_t, big = largest_table(runs, cfg)
    vs_g = mlroute_vs(runs, "greedy") if {"mlroute", "greedy"} <= {r["algo"] for r in runs} else None
    L = ["# Reproduction of the paper's comparison (flow-level simulation)\n", _generated(results, command)]
    L += _setup_section(results)
    L.append("## Headline\n")
    L.append(_say("headline", n=len(common), but_ilp="" if "ilp" in stats else " but `ilp`"))
    L.append(head + "\n")
    if vs_g:
        L.append(_say("vs_greedy", **_vs_values(vs_g)))
    L.append("### By number of failed spines (All-Reduce / ideal, pooled)\n")
    L.append(by_failures(runs, common) + "\n")
    if ilp_t:
        L.append("### Against the ILP optimum (cells where `ilp` finished)\n")
        L.append(ilp_t + "\n")
    L.append(_say("largest", jobs=big[0], ring=big[1]))
    L.append("Simulation wall time is the whole run (optimiser calls included) on this machine, one core per run.\n")
    L.append(large_t + "\n")
    for f in cfg["failed"]:
        L.append(_say("per_cell", f=f, s=_plural(f)))
        L.append(by_cell_table(runs, f) + "\n")
    L.append("## Plots\n")
    L.append("- Mean and tail (p99) All-Reduce time / ideal across the grid: ![mean](allreduce_mean.png) "
             "![p99](allreduce_p99.png)")
    L.append("- CDF of All-Reduce time / ideal: ![cdf](cdf_allreduce.png)")
    L.append(_say("plot_cdfs", jobs=big[0], ring=big[1]))
    L.append("- Optimiser runtime against the number of flows routed: ![runtime](runtime.png)\n")
    L.append(claims_section(runs, stats, ilp_r, vs_g, cfg, big))
    if results.get("extra") and results["extra"]["runs"]:
        L.append(extra_section(results["extra"], out_dir))
    L.append(discussion_section(runs, (results.get("extra") or {}).get("runs", []), cfg))
    if results.get("skipped"):
        L.append("## Skipped runs\n")
        L.append(_table(["jobs", "ring", "failed", "algorithm", "reason"],
                        [[s["jobs"], s["ring"], s["failed"], f"`{s['algo']}`", s["reason"]]
                         for s in results["skipped"]]) + "\n")
    text = "\n".join(L)
    with open(os.path.join(out_dir, "report.md"), "w") as fh:
        fh.write(text)
    return text


def _write_plots(runs: list, cfg: dict, big: tuple, out_dir: str) -> None:
    plot_grid_metric(runs, cfg, "norm_mean", "mean All-Reduce / ideal", os.path.join(out_dir, "allreduce_mean.png"))
    plot_grid_metric(runs, cfg, "norm_p99", "p99 All-Reduce / ideal", os.path.join(out_dir, "allreduce_p99.png"))
    plot_cdf_allreduce(runs, os.path.join(out_dir, "cdf_allreduce.png"))
    cdf_cells = [(*big, min(cfg["failed"])), (*big, max(cfg["failed"]))]
    if cdf_cells[0] == cdf_cells[1]:
        cdf_cells = cdf_cells[:1]
    plot_cdf_quantiles(runs, cdf_cells, "fct_q", "flow completion time of one transfer, s (log)",
                       os.path.join(out_dir, "cdf_fct.png"))
    plot_cdf_quantiles(runs, cdf_cells, "tput_q", "throughput of one transfer, Gb/s", os.path.join(out_dir,
                       "cdf_throughput.png"), log=False)
    plot_runtime(runs, os.path.join(out_dir, "runtime.png"))


def _generated(results: dict, command: str) -> str:
    commit = results.get("code_commit")
    return _say("generated", cmd=command if "`" in command else f"`{command}`", label=results["config"]["label"],
                minutes=results["wall_s"] / 60, cpus=results["machine"]["cpus"],
                python=results["machine"]["python"], commit=f", code at commit `{commit}`" if commit else "",
                sweep=_sweep_note(results.get("sweep")))


def _sweep_note(sweep: dict | None) -> str:
    """How the runs were executed: the workers, and the runs reused from an earlier, interrupted invocation."""
    if not sweep:
        return ""
    how = {"processes": f"{sweep['workers']} local worker processes", "serial": "one process",
           "dask": f"a Dask cluster of {sweep['workers']} worker threads"}.get(sweep["executor"], sweep["executor"])
    note = f"; runs on {how}, {sweep['task_s'] / 60:.1f} min of run time in all"
    if sweep.get("reused"):
        note += f", {sweep['reused']} of {sweep['runs']} runs reused from an earlier invocation (same code)"
    return note


def _setup_section(results: dict) -> list[str]:
    from mlroute.workloads.jobs import BYTES_PER_PARAM, PAPER_ITERATIONS, START_WINDOW_S

    runs, cfg = results["runs"], results["config"]
    hpt, spines = cfg["hosts_per_tor"], cfg["spines"]
    L = ["## Set-up\n"]
    L.append(_say("fabric", tors=cfg["tors"], spines=spines, hosts_per_tor=hpt, gbps=cfg["link_gbps"],
                  oversub="1:1" if hpt == spines else f"{hpt}:{spines} hosts to uplinks per ToR"))
    L.append(_say("grid", jobs=", ".join(map(str, cfg["jobs"])), rings=", ".join(map(str, cfg["rings"])),
                  failed=", ".join(map(str, cfg["failed"])), algos=_ticks(cfg["algos"]),
                  iterations=cfg["iterations"], n_runs=len(runs)))
    L.append(_say("workload", models=", ".join(cfg["models"]), n_models=len(cfg["models"]), bpp=BYTES_PER_PARAM,
                  start_min=START_WINDOW_S[0], start_max=START_WINDOW_S[1], seed=cfg["seed"]))
    packed = _packed_cells(runs, cfg)
    if packed:
        L.append(packed)
    if cfg["iterations"] != PAPER_ITERATIONS or cfg["label"] != "full":
        L.append(_say("short", iterations=cfg["iterations"], paper_iterations=PAPER_ITERATIONS, label=cfg["label"]))
    L.append(_say("controller"))
    L.append(_say("ideal"))
    if results.get("skipped"):
        L.append(_say("ilp_skips", limit=cfg["ilp_time_limit"], n=len(results["skipped"])))
    L.append("")
    return L


def _packed_cells(runs: list, cfg: dict) -> str | None:
    """The deviation note for cells that needed more than one GPU per NIC (with the ToRs one GPU would take)."""
    from mlroute.workloads.jobs import tors_needed

    packed = sorted({(r["jobs"], r["ring"], r["gpus_per_host"]) for r in runs if r["gpus_per_host"] > 1})
    if not packed:
        return None
    need = [tors_needed(j, r, cfg["hosts_per_tor"], tuple(cfg["models"])) for j, r, _ in packed]
    return _say("packed", cells=", ".join(f"{j} jobs × ring {r}" for j, r, _ in packed), need=_span(need),
                tors=cfg["tors"], packing=", ".join(sorted({f"{g} GPUs per NIC" for _, _, g in packed})))


def claims_section(runs, stats, ilp_r, vs_g, cfg, big) -> str:
    """The paper's claims (docs/paper.md) next to what this run measured."""
    L = ["## The paper's claims against this reproduction\n", _claim_ilp(ilp_r)]
    if stats.get("greedy"):
        L += [x for x in (_claim_fct(stats), _claim_runtime(runs, stats), _claim_failures(runs, stats, cfg)) if x]
    if "ecmp" in stats:
        L.append(_claim_ecmp(runs, stats["ecmp"]))
    if vs_g:
        L.append(_say("c_vs", **_vs_values(vs_g)))
    L.append("")
    return "\n".join(L)


def _claim_ilp(ilp_r: dict) -> str:
    r = ilp_r.get("greedy")
    if not r:
        return _say("c_no_ilp")
    m = ilp_r.get("mlroute")
    return _say("c_ilp", n=r["n"], mean=r["mean"], worst=r["worst"], close=100 * ILP_CLOSE, within=r["within1"],
                mlroute=_say("c_ilp_mlroute", mean=m["mean"], worst=m["worst"]) if m else "")


def _claim_fct(stats: dict) -> str | None:
    g = stats["greedy"]
    others = {a: s for a, s in stats.items() if a != "greedy"}
    if not others:
        return None
    best, best_s = min(others.items(), key=lambda kv: kv[1]["fct_rel"])
    return _say("c_fct", g_fct=g["fct_rel"], best=best, best_fct=best_s["fct_rel"], g_tput=g["tput_mean"],
                others=", ".join(f"`{a}` {s['tput_mean']:.1f}" for a, s in others.items()))


def _claim_runtime(runs: list, stats: dict) -> str:
    g = stats["greedy"]
    heavy = {a: s["ms_median"] for a, s in stats.items() if a in ("coloring", "annealing")}
    ilp_ms = [x for r in runs if r["algo"] == "ilp" for x in r["controller_ms"]]
    return _say("c_runtime", paper_ms=PAPER_CLAIMS["greedy_ms"], g_ms=g["ms_median"], g_p99=g["ms_p99"],
                heavy="".join(f", `{a}` {v:.2f} ms" for a, v in heavy.items()),
                mlroute=f", `mlroute` {stats['mlroute']['ms_median']:.2f} ms" if "mlroute" in stats else "",
                ilp=f", `ilp` {np.median(ilp_ms):.0f} ms (where it finished)" if ilp_ms else "")


def _claim_failures(runs: list, stats: dict, cfg: dict) -> str:
    fails = sorted(cfg["failed"])
    common = _common_cells(runs, [a for a in _algos(runs) if a != "ilp"])
    per_f = {a: {f: float(np.mean([x for r in runs if r["algo"] == a and _cell(r) in common and r["failed"] == f
                                   for x in r["norm_all"]])) for f in fails} for a in stats}

    def trend(a):
        return " → ".join(f"{per_f[a][f]:.3f}" for f in fails)

    others = "".join(f"; `{a}` {trend(a)}" for a in ("mlroute", "ecmp") if a in per_f)
    return _say("c_failures", greedy=trend("greedy"), fails=", ".join(map(str, fails)), others=others)


def _claim_ecmp(runs: list, e: dict) -> str:
    loads = [r["max_link_load"] for r in runs if r["algo"] == "ecmp"]
    return _say("c_ecmp", paper_worst=PAPER_CLAIMS["ecmp_worst_link"], lo=min(loads), hi=max(loads),
                median=int(np.median(loads)), mean=e["norm_mean"], p99=e["norm_p99"])


def extra_section(extra: dict, out_dir: str) -> str:
    """The supplementary grid with random host placement (not in the paper)."""
    runs = extra["runs"]
    cfg = extra["config"]
    plot_grid_metric(runs, cfg, "norm_mean", "mean All-Reduce / ideal", os.path.join(out_dir, "random_mean.png"))
    head, stats, common = headline(runs)
    vs = mlroute_vs(runs, "greedy") if {"mlroute", "greedy"} <= {r["algo"] for r in runs} else None
    ilp_t, _ = ilp_table(runs, cfg.get("ilp_time_limit"))
    L = ["## Beyond the paper: random host placement\n"]
    L.append(_say("x_intro", jobs=", ".join(map(str, cfg["jobs"])), rings=", ".join(map(str, cfg["rings"])),
                  failed=", ".join(map(str, cfg["failed"])), iterations=cfg["iterations"], seed=cfg["seed"],
                  n_runs=len(runs), algos=_ticks(cfg["algos"]),
                  left_out="" if {"ecmp", "annealing"} <= set(cfg["algos"]) else _say("x_left_out")))
    L.append(head + "\n")
    if vs:
        L.append(_say("vs_other", **_vs_values(vs)))
    beaten = _mlroute_beaten(runs)
    if beaten:
        L.append(_say("x_beaten", n=len(beaten), s=_plural(len(beaten)), cells="; ".join(beaten)))
    if ilp_t:
        L.append(ilp_t + "\n")
    for f in cfg["failed"]:
        L.append(_say("x_per_cell", f=f, s=_plural(f)))
        L.append(by_cell_table(runs, f) + "\n")
    L.append("![random placement](random_mean.png)\n")
    return "\n".join(L)


def _mlroute_beaten(runs: list) -> list[str]:
    """Cells where another algorithm has a shorter mean All-Reduce than mlroute."""
    out = []
    for c, d in sorted(_by_cell(runs).items()):
        others = {a: r["norm_mean"] for a, r in d.items() if a != "mlroute"}
        if "mlroute" not in d or not others:
            continue
        a, v = min(others.items(), key=lambda kv: kv[1])
        m = d["mlroute"]["norm_mean"]
        if v < m * (1 - REPORT_REL_TOL):
            out.append(_say("x_beaten_cell", jobs=c[0], failed=c[2], algo=a, v=v, m=m))
    return out


def discussion_section(runs, extra_runs, cfg) -> str:
    """Why the numbers come out as they do (the analysis is argued; every count is computed)."""
    L = ["## Discussion: where `mlroute` beats the paper's greedy, and where not, and why\n"]
    L += _discuss_ilp(_by_cell(runs))
    for part in (_discuss_failures(runs, cfg), _discuss_random(extra_runs), _discuss_annealing(runs),
                 _discuss_fct(runs)):
        if part:
            L.append(part)
    L.append(_discuss_runtime(cfg))
    L.append("")
    return "\n".join(L)


def _discuss_ilp(byc: dict) -> list[str]:
    cells = [c for c, d in byc.items() if "ilp" in d and "greedy" in d]
    if not cells:
        return []
    same = sum(1 for c in cells if byc[c]["greedy"]["max_link_load"] == byc[c]["ilp"]["max_link_load"])
    worse = [c for c in cells if byc[c]["ilp"]["norm_mean"] > byc[c]["greedy"]["norm_mean"] * (1 + REPORT_REL_TOL)]
    out = [_say("d_optimal", n=len(cells)) if same == len(cells) else _say("d_not_optimal", same=same, n=len(cells))]
    if worse:
        out.append(_say("d_ilp_worse", worse=len(worse), n=len(cells)))
    return out


def _discuss_failures(runs: list, cfg: dict) -> str | None:
    one = [r for r in runs if r["gpus_per_host"] == 1 and r["failed"] > 0 and r["algo"] in ("mlroute", "greedy")]
    if not one:
        return None
    floor = sorted({round(r["norm_mean"], 3) for r in one})
    live = [cfg["spines"] - f for f in sorted(cfg["failed"]) if f > 0]
    # a full ToR's flows over its live uplinks: the most loaded uplink carries at least this many
    shares = sorted({-(-cfg["hosts_per_tor"] // n) for n in live})
    return _say("d_failures", floor=_span(shares), hosts_per_tor=cfg["hosts_per_tor"],
                live=", ".join(map(str, live)), lo=min(floor), hi=max(floor))


def _discuss_random(extra_runs: list) -> str | None:
    if not extra_runs:
        return None
    vs = mlroute_vs(extra_runs, "greedy")
    if vs["n"] and vs["better"]:
        return _say("d_random_wins", **_vs_values(vs))
    if vs["n"]:
        return _say("d_random_same", equal=vs["equal"], n=vs["n"], worse=vs["worse"])
    return None


def _discuss_annealing(runs: list) -> str | None:
    from mlroute.routing.optimisers.annealing import planned_steps

    ann = [r for r in runs if r["algo"] == "annealing"]
    if not ann:
        return None
    return _say("d_annealing", steps=planned_steps(), lo=min(r["max_link_load"] for r in ann),
                hi=max(r["max_link_load"] for r in ann))


def _discuss_fct(runs: list) -> str | None:
    byc = _by_cell(runs)
    ec = [r for r in runs if r["algo"] == "ecmp"]
    if not ec or "mlroute" not in {r["algo"] for r in runs}:
        return None
    lower = sum(1 for c, d in byc.items() if "ecmp" in d and "mlroute" in d
                and d["ecmp"]["fct_mean_s"] < d["mlroute"]["fct_mean_s"])
    packed = [c for c, d in byc.items() if "ecmp" in d and d["ecmp"]["gpus_per_host"] > 1]
    if lower:
        return _say("d_fct_misleads", lower=lower, n=len(ec))
    return _say("d_fct", packed=f" (including the {len(packed)} cells with GPUs sharing a NIC)" if packed else "")


def _discuss_runtime(cfg: dict) -> str:
    from mlroute.workloads.jobs import MODELS

    compute_s = min(MODELS[m].compute_s for m in cfg["models"] if m in MODELS)
    return _say("d_runtime", paper_ms=PAPER_CLAIMS["greedy_ms"], compute_s=compute_s)


def load_results(path):
    with open(path) as fh:
        return json.load(fh)
