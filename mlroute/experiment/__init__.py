"""Mininet experiments: emulated fabrics, real controller runs per routing mode, iperf3 and ring all-reduce
traffic, measurements and plots (``mlroute experiment``). Needs root, Open vSwitch and Mininet."""
