"""iperf3 reports read on the receiving side: the server's own intervals, summed per second over flows; the
new-flow storm as a host runs it."""

import socket
import subprocess

from mlroute.experiment.traffic import NewFlowStorm, received_per_second, steady_mbps


def report(sent, received):
    """An iperf3 client report (``-J --get-server-output``) with these per-second Mb/s on each side."""
    def intervals(rates):
        return [{"sum": {"start": float(i), "end": i + 1.0, "bits_per_second": r * 1e6}} for i, r in enumerate(rates)]
    return {"intervals": intervals(sent), "server_output_json": {"intervals": intervals(received)}}


def test_the_per_second_sum_is_what_the_receivers_got_not_what_the_senders_wrote():
    reports = [report([12, 6, 12], [10, 9, 10]), report([5, 15, 10], [10, 10, 10])]
    assert received_per_second(reports) == [20, 19, 20]


def test_a_failed_client_or_a_report_without_the_servers_output_adds_nothing():
    reports = [report([10, 10], [9, 9]), None, {"intervals": report([10], [10])["intervals"]}]
    assert received_per_second(reports) == [9, 9]


def test_the_steady_rate_is_received_after_the_warmup():
    assert steady_mbps(report([20, 20, 20, 20], [2, 4, 8, 10]), warmup_s=2) == 9
    assert steady_mbps(None, warmup_s=0) == 0


class LocalHost:
    """A Mininet host's ``popen``, run here."""

    def popen(self, args):
        return subprocess.Popen(args, stdout=subprocess.PIPE)


def test_a_storm_starts_at_port_1024_and_is_never_ahead_of_its_rate():
    sink = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sink.bind(("127.0.0.1", 1024))  # the first packet's port: the rest cycle on from it
    sink.settimeout(5)
    try:
        sent = NewFlowStorm(LocalHost(), "127.0.0.1", rate=400, seconds=0.5).sent()
        assert sink.recv(16) == b"x"
    finally:
        sink.close()
    assert 0 < sent <= 200  # paced by the clock: at most rate x seconds (how close is the live test's)
