"""The integration tests use the same emulation pieces as `mlroute experiment` (one implementation)."""

from controller.experiment.emulation import (Controller, ROOT, free_port, iperf3, ping_all, set_jumbo,  # noqa: F401
                                             start_network, stop_network, wait_until)
