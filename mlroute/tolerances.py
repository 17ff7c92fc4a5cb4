"""Numeric tolerances: the one place that says when two floating-point numbers count as equal.

Rates and loads come out of water-filling (sums and divisions over up to ~1e5 flows), so two rates that are the
same in exact arithmetic differ by float noise of a few ulps times the number of terms; every comparison of
rates, loads and capacities uses :data:`REL_TOL`. Quantities of order 1 compared absolutely (demand fractions,
probabilities) use :data:`ABS_TOL`, which also floors relative scales near zero.
"""

#: Two rates, loads or capacities within this relative distance are equal (the metric, the optimisers).
REL_TOL = 1e-9

#: Absolute tolerance for quantities of order 1 (fractions of a NIC, probabilities); floor of relative scales.
ABS_TOL = 1e-12

#: Floor of a relative scale that must stay positive (water-filling levels of nearly starved flows).
TINY = 1e-300

#: An LP bound within this distance below an integer is that integer (the LP solver's own feasibility slack).
SOLVER_TOL = 1e-6

#: Simulated or measured means within this relative distance are reported as equal (no better/worse claim).
REPORT_REL_TOL = 1e-6

#: Seconds: timestamps in iperf3's JSON are printed to the microsecond.
TIME_TOL_S = 1e-6
