"""iperf3 reports read on the receiving side: the server's own intervals, summed per second over flows."""

from mlroute.experiment.traffic import received_per_second, steady_mbps


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
