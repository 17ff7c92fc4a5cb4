from controller.state.budget import TokenBucket


def test_a_burst_then_the_rate():
    now = [0.0]
    bucket = TokenBucket(rate=10, burst=3, clock=lambda: now[0])
    assert [bucket.take() for _ in range(5)] == [True, True, True, False, False]
    now[0] = 0.25  # 2.5 tokens back
    assert [bucket.take() for _ in range(3)] == [True, True, False]
    now[0] = 100.0  # never more than the burst saved up
    assert sum(bucket.take() for _ in range(10)) == 3
