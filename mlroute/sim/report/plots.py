"""The report's plots (matplotlib, Agg backend), one PNG each; matplotlib is imported only when one is drawn."""

from __future__ import annotations

import os
from collections import defaultdict

import numpy as np

from mlroute.sim.report.figures import _algos, _by_cell, _cell, _common_cells

COLOURS = {"mlroute": "#d62728", "greedy": "#1f77b4", "coloring": "#2ca02c", "annealing": "#9467bd",
           "gff": "#8c564b", "ecmp": "#7f7f7f", "ilp": "#ff7f0e"}

# overlapping curves (equal results are common) stay visible: the project's algorithm thick and solid, the rest
# thinner and dashed/dotted
STYLES = {"mlroute": ("-", 3.0), "greedy": ("--", 1.8), "coloring": (":", 1.8), "annealing": ("-", 1.2),
          "gff": ("-.", 1.4), "ecmp": ("-", 1.2), "ilp": ((0, (1, 3)), 2.2)}


def _style(a):
    ls, lw = STYLES.get(a, ("-", 1.3))
    return {"color": COLOURS.get(a), "linestyle": ls, "linewidth": lw}


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
