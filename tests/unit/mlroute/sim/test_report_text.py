"""The report's prose (``mlroute.sim.report.text``): every number in a sentence comes from the results."""


def test_report_prose_takes_its_numbers_from_the_results():
    from mlroute.routing.optimisers.annealing import planned_steps
    from mlroute.sim.report import text as report

    cfg = {"tors": 64, "hosts_per_tor": 32, "models": ["gpt3", "bloom", "llama2"]}
    runs = [{"jobs": 4, "ring": 8, "gpus_per_host": 2}, {"jobs": 5, "ring": 8, "gpus_per_host": 2}]
    text = report._packed_cells(runs, cfg)
    assert "4 jobs × ring 8, 5 jobs × ring 8" in text and "these need 80–96 of the 64 ToRs" in text
    assert "these need 40 of the 16 ToRs" in report._packed_cells(runs[:1], dict(cfg, tors=16, hosts_per_tor=64))
    ann = report._discuss_annealing([{"algo": "annealing", "max_link_load": 4}, {"algo": "annealing",
                                                                                 "max_link_load": 9}])
    assert f"{planned_steps()} swaps" in ann and "max link load 4–9" in ann
    assert planned_steps() == 917  # 1000 * 0.99^n < 0.1
    # a full ToR of 32 flows over 28 or 24 live spines: 2 on the busiest uplink; over 8 spines: 4
    fail = report._discuss_failures([{"gpus_per_host": 1, "failed": 4, "algo": "greedy", "norm_mean": 2.0}],
                                    {"spines": 32, "failed": [0, 4, 24], "hosts_per_tor": 32})
    assert "about 2–4×" in fail and "with 28, 8 live spines" in fail
    source = open(report.__file__, encoding="utf-8").read()
    for key in report.TEXT:  # every template is used (its key appears beyond its definition)
        assert source.count(f'"{key}"') >= 2, key
