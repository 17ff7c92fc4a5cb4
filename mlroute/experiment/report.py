"""Experiment output: results.json, a Markdown summary and PNG plots (matplotlib, no display needed)."""

from __future__ import annotations

import json
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np


def failed_runs(data: dict) -> list[dict]:
    """The runs that ended in an error (reported, left out of the summary and plots)."""
    return [r for r in data["results"] if "error" in r]


def summarise(data: dict) -> list[dict]:
    """Per (pattern, mode): mean/min/max of the non-blocking fraction and aggregate over seeds."""
    rows: dict[tuple[str, str], list[dict]] = {}
    for r in data["results"]:
        if "error" in r:
            continue
        rows.setdefault((r["pattern"], r["mode"]), []).append(r)
    out = []
    for (pattern, mode), runs in rows.items():
        fracs = [r["nonblocking_fraction"] for r in runs if r.get("nonblocking_fraction") is not None]
        aggs = [r["aggregate_mbps"] for r in runs]
        row = {"pattern": pattern, "mode": mode, "runs": len(runs), "aggregate_mbps": float(np.mean(aggs)),
               "fraction_mean": float(np.mean(fracs)) if fracs else None,
               "fraction_min": float(np.min(fracs)) if fracs else None,
               "fraction_max": float(np.max(fracs)) if fracs else None}
        steady = [r["steady_allreduce_s"] for r in runs if "steady_allreduce_s" in r]
        if steady:
            row["allreduce_s"] = float(np.mean(steady))
            row["ideal_allreduce_s"] = runs[0]["ideal_allreduce_s"]
        out.append(row)
    return out


def markdown(data: dict, summary: list[dict]) -> str:
    """summary.md: the configuration, one table row per (pattern, mode), failed runs, the plots."""
    cfg = data["config"]
    lines = [f"# mlroute experiment: {cfg['topology']}, {cfg['bw_mbps']:g} Mb/s links", "",
             f"{cfg['duration_s']:g} s of traffic per run, the first {cfg['warmup_s']:g} s discarded; seeds "
             f"{', '.join(map(str, cfg['seeds']))}; controller polls every {cfg['poll_interval_s']:g} s. "
             "Fractions are of the measured non-blocking reference (same hosts on one big switch).", "",
             "| pattern | mode | runs | aggregate Mb/s | fraction of non-blocking (mean, min-max) | all-reduce s |",
             "|---|---|---|---|---|---|"]
    for row in summary:
        frac = ("—" if row["fraction_mean"] is None else
                f"{row['fraction_mean']:.3f} ({row['fraction_min']:.3f}–{row['fraction_max']:.3f})")
        ar = f"{row['allreduce_s']:.2f} (ideal {row['ideal_allreduce_s']:.2f})" if "allreduce_s" in row else "—"
        lines.append(f"| {row['pattern']} | {row['mode']} | {row['runs']} | {row['aggregate_mbps']:.1f} | {frac} "
                     f"| {ar} |")
    above = sorted({f"{row['pattern']} {row['mode']}" for row in summary
                    if row["fraction_max"] is not None and row["fraction_max"] > 1.0 and row["mode"] != "nonblocking"})
    if above:
        lines += ["", f"Above 1.0 ({', '.join(above)}): no routing beats the non-blocking switch, so its run read "
                  "low. Each run is one measurement on a shared CPU; more seeds or a longer --duration narrow it.", ""]
    lines += torch_jobs_markdown(data)
    failed = failed_runs(data)
    if failed:
        lines += ["", "Failed runs:", ""] + [f"- {r['pattern']} seed {r['seed']} {r['mode']}: {r['error']}"
                                            for r in failed]
    lines += ["", "Plots: `throughput.png` (aggregate as % of non-blocking), `flows_cdf.png` (per-flow "
              "throughput, iperf3 patterns), `allreduce.png` (iteration times, all-reduce patterns).", ""]
    return "\n".join(lines)


def torch_jobs_markdown(data: dict) -> list[str]:
    """Per real PyTorch job (torch-allreduce runs): its iterations (slowest rank), iteration 0 over the mean of the
    rest, that mean over the ring's ideal; and whether the controller's elephants were the declared ring edges."""
    runs = [r for r in data["results"] if "error" not in r and "jobs" in r]
    if not runs:
        return []
    lines = ["", "Real PyTorch gloo jobs (`torchrun -m mlroute.torch`), all-reduce time of the slowest rank per "
             "iteration; steady = mean of iterations 1.., ideal = 2(n-1)/n x tensor at the link rate:", "",
             "| pattern | seed | mode | job | hosts | iterations (s) | it. 0 / steady | steady / ideal |",
             "|---|---|---|---|---|---|---|---|"]
    for r in runs:
        for job in r["jobs"]:
            times = ", ".join(f"{t:.2f}" for t in job["allreduce_s"])
            lines.append(f"| {r['pattern']} | {r['seed']} | {r['mode']} | {job['name']} | {' '.join(job['hosts'])} "
                         f"| {times} | {job['first_over_steady']:.2f} | {job['steady_over_ideal']:.2f} |")
    lines += ["", "Ideal all-reduce: " + ", ".join(sorted({f"{r['ideal_allreduce_s']:.2f} s ({r['pattern']})"
                                                           for r in runs})) + "."]
    for r in runs:
        if not r.get("declaring"):
            continue
        edges = {(a, b) for rings in r["declared"].values() for ring in rings
                 for a, b in zip(ring, ring[1:] + ring[:1])}
        seen = {tuple(p) for p in r["elephant_pairs"]}
        if r["mode"] == "nonblocking" or not seen:
            continue
        verdict = "equal" if seen == edges else (f"differ: {len(seen - edges)} elephant pairs not declared, "
                                                 f"{len(edges - seen)} declared edges never elephants")
        lines.append(f"- {r['mode']} seed {r['seed']}: {len(r['declared'])} jobs declared themselves "
                     f"({len(edges)} ring edges); the elephants' host pairs and the declared edges {verdict}.")
    return lines


def plots(data: dict, summary: list[dict], out_dir: str | Path) -> list[str]:
    """Write the PNG plots the results support; returns their file names."""
    plt = _pyplot()
    modes = list(dict.fromkeys(r["mode"] for r in summary))
    written = [_throughput_plot(plt, data, summary, modes, out_dir)]
    for plot in (_flows_cdf_plot, _allreduce_plot):
        name = plot(plt, data, modes, out_dir)
        if name:
            written.append(name)
    return written


def _pyplot() -> ModuleType:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _bars(summary: list[dict], patterns: list[str], mode: str) -> tuple[list[float], list[list[float]]]:
    """Mean % of non-blocking per pattern and the (down, up) error bars to the min and max over seeds."""
    vals: list[float] = []
    errs: list[list[float]] = [[], []]
    for p in patterns:
        row = next((r for r in summary if r["pattern"] == p and r["mode"] == mode), None)
        mean = 100 * row["fraction_mean"] if row and row["fraction_mean"] is not None else 0
        vals.append(mean)
        errs[0].append(mean - 100 * row["fraction_min"] if row and row["fraction_min"] is not None else 0)
        errs[1].append(100 * row["fraction_max"] - mean if row and row["fraction_max"] is not None else 0)
    return vals, errs


def _throughput_plot(plt: ModuleType, data: dict, summary: list[dict], modes: list[str], out_dir: str | Path) -> str:
    patterns = list(dict.fromkeys(r["pattern"] for r in summary))
    fig, ax = plt.subplots(figsize=(max(5, 1.6 * len(patterns) * len(modes) / 2), 3.6))
    width = 0.8 / max(1, len(modes))
    for j, mode in enumerate(modes):
        vals, errs = _bars(summary, patterns, mode)
        ax.bar(np.arange(len(patterns)) + j * width, vals, width, yerr=errs, label=mode, capsize=3)
    ax.set_xticks(np.arange(len(patterns)) + width * (len(modes) - 1) / 2, patterns)
    ax.set_ylabel("aggregate throughput, % of non-blocking")
    ax.set_ylim(0, 110)
    ax.axhline(100, color="grey", lw=0.8, ls="--")
    ax.legend(fontsize=8)
    ax.set_title(data["config"]["topology"])
    return _save(plt, fig, out_dir, "throughput.png")


def _flows_cdf_plot(plt: ModuleType, data: dict, modes: list[str], out_dir: str | Path) -> str | None:
    """Per-flow throughput of the iperf3 patterns (all-reduce edges are summarised by iteration times)."""
    cdfs = {mode: sorted(f["mbps"] for r in data["results"] if r.get("mode") == mode and "error" not in r
                         and "allreduce_s" not in r for f in r["flows"]) for mode in modes}
    if not any(cdfs.values()):
        return None
    fig, ax = plt.subplots(figsize=(5, 3.6))
    for mode, rates in cdfs.items():
        if rates:
            ax.step(rates, np.arange(1, len(rates) + 1) / len(rates), where="post", label=mode)
    ax.set_xlabel("per-flow throughput (Mb/s, steady part)")
    ax.set_ylabel("CDF")
    ax.legend(fontsize=8)
    return _save(plt, fig, out_dir, "flows_cdf.png")


def allreduce_lines(data: dict, modes: list[str]) -> dict[str, list[float]]:
    """The all-reduce plot's lines: mean all-reduce time per iteration over seeds, per mode, and per pattern when
    the grid has several (rank order vs chosen rings: ``torch-allreduce:...`` and ``...,ring=choose``)."""
    ar_runs = [r for r in data["results"] if "allreduce_s" in r and "error" not in r]
    patterns = list(dict.fromkeys(r["pattern"] for r in ar_runs))
    lines = {}
    for pattern in patterns:
        for mode in modes:
            runs = [r for r in ar_runs if r["mode"] == mode and r["pattern"] == pattern]
            n = min((len(r["allreduce_s"]) for r in runs), default=0)
            if n:
                label = mode if len(patterns) == 1 else f"{pattern.split(':', 1)[1]} / {mode}"
                lines[label] = [float(x) for x in np.mean([r["allreduce_s"][:n] for r in runs], axis=0)]
    return lines


def _allreduce_plot(plt: ModuleType, data: dict, modes: list[str], out_dir: str | Path) -> str | None:
    """Mean all-reduce time per iteration over seeds, per mode (and pattern), against the ideal."""
    import matplotlib.ticker

    lines = allreduce_lines(data, modes)
    if not lines:
        return None
    fig, ax = plt.subplots(figsize=(5 if len(lines) <= 4 else 7, 3.6))
    for label, mean in lines.items():
        ax.plot(range(len(mean)), mean, marker="o", label=label)
    ideal = next(r["ideal_allreduce_s"] for r in data["results"] if "allreduce_s" in r and "error" not in r)
    ax.axhline(ideal, color="grey", ls="--", lw=0.8, label="ideal")
    ax.set_xlabel("iteration")
    ax.xaxis.set_major_locator(matplotlib.ticker.MaxNLocator(integer=True))
    ax.set_ylabel("all-reduce time (s)")
    ax.legend(fontsize=7)
    return _save(plt, fig, out_dir, "allreduce.png")


def _save(plt: ModuleType, fig: Any, out_dir: str | Path, name: str) -> str:
    fig.tight_layout()
    fig.savefig(Path(out_dir) / name, dpi=120)
    plt.close(fig)
    return name


def write(data: dict, out_dir: str | Path) -> dict:
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    summary = summarise(data)
    data = dict(data, summary=summary)
    (out_dir / "results.json").write_text(json.dumps(data, indent=1))
    (out_dir / "summary.md").write_text(markdown(data, summary))
    data["plots"] = plots(data, summary, out_dir) if summary else []
    return data
