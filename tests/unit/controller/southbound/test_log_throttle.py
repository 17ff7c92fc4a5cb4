"""One log line per key per period (controller.southbound.log_throttle)."""

from controller.southbound.log_throttle import MAX_KEYS, LogThrottle
from tests.clock import FakeClock


def test_a_key_is_due_once_per_period_and_keys_are_independent():
    clock = FakeClock(100.0)
    log = LogThrottle(clock, period_s=60)
    assert log.due((1, 2)) and not log.due((1, 2)) and log.due((1, 3))
    clock.advance(59.9)
    assert not log.due((1, 2))
    clock.advance(0.1)
    assert log.due((1, 2))


def test_its_memory_is_bounded_by_forgetting_keys_past_their_period():
    clock = FakeClock()
    log = LogThrottle(clock, period_s=60)
    for port in range(MAX_KEYS):
        log.due(port)
    clock.advance(61)
    assert log.due("new") and len(log._last) == 1
