"""The integration tests use the same emulation pieces as `mlroute experiment` (one implementation)."""

from pathlib import Path

from mlroute.experiment.emulation import (  # noqa: F401
                                          Controller,
                                          free_port,
                                          iperf3,
                                          ping_all,
                                          set_jumbo,
                                          start_network,
                                          stop_network,
                                          wait_until,
)

ROOT = Path(__file__).resolve().parents[2]
