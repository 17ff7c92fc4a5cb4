"""The reproduction report: Markdown tables and matplotlib (Agg) plots from ``results.json``.

Every number in the report is computed here from the simulation results; nothing is typed in by hand.
"""

from __future__ import annotations

import json

from mlroute.sim.report.figures import (
    ALGO_ORDER,
    ILP_CLOSE,
    by_cell_table,
    by_failures,
    headline,
    ilp_table,
    largest_table,
    mlroute_vs,
)
from mlroute.sim.report.plots import (
    COLOURS,
    STYLES,
    plot_cdf_allreduce,
    plot_cdf_quantiles,
    plot_grid_metric,
    plot_runtime,
)
from mlroute.sim.report.text import PAPER_CLAIMS, TEXT, claims_section, discussion_section, extra_section, write_report

__all__ = ["ALGO_ORDER", "COLOURS", "ILP_CLOSE", "PAPER_CLAIMS", "STYLES", "TEXT", "by_cell_table", "by_failures",
           "claims_section", "discussion_section", "extra_section", "headline", "ilp_table", "largest_table",
           "load_results", "mlroute_vs", "plot_cdf_allreduce", "plot_cdf_quantiles", "plot_grid_metric",
           "plot_runtime", "write_report"]


def load_results(path):
    with open(path) as fh:
        return json.load(fh)
