"""The broker's windowed message counts (VIEW_BROKER_STATS_DATA), its put / get rates and the daily
morning marks of the runtime info, on explicit clocks."""

from __future__ import annotations

from rmq.broker.services import Counters
from rmq.broker.stats import DAY_MS, HOUR_MS, MINUTE_MS, RateSampler, WindowCounter

T0 = 1_700_000_000_000 - 1_700_000_000_000 % DAY_MS  # a midnight (UTC), so buckets start on it


def test_window_counter_sums_what_falls_in_each_window() -> None:
    c = WindowCounter()
    c.add("t@g", 5, now_ms=T0)
    c.add("t@g", 3, now_ms=T0 + 5_000)  # same 10 s bucket
    c.add("t@g", 2, now_ms=T0 + 30 * MINUTE_MS)
    now = T0 + 30 * MINUTE_MS + 1_000
    assert (c.window("t@g", MINUTE_MS, now).sum, c.window("t@g", MINUTE_MS, now).times) == (2, 1)
    assert (c.window("t@g", HOUR_MS, now).sum, c.window("t@g", HOUR_MS, now).times) == (10, 3)
    assert c.window("t@g", DAY_MS, now).sum == 10
    later = T0 + 2 * HOUR_MS
    assert (c.window("t@g", MINUTE_MS, later).sum, c.window("t@g", HOUR_MS, later).sum) == (0, 0)
    assert c.window("t@g", DAY_MS, later).sum == 10
    assert c.window("t@g", DAY_MS, T0 + DAY_MS + 2 * HOUR_MS).sum == 0
    assert "t@g" in c and "other" not in c and c.window("other", DAY_MS, now).sum == 0


def test_window_counter_forgets_deleted_topics_and_groups() -> None:
    c = WindowCounter()
    for key in ("T1@G1", "T1@G2", "T2@G1", "T2@G2"):
        c.add(key, 1, now_ms=T0)
    assert c.forget(topic="T1") == 2
    assert c.forget(group="G1") == 1
    assert ["T1@G1" in c, "T1@G2" in c, "T2@G1" in c, "T2@G2" in c] == [False, False, False, True]


def test_window_counter_keeps_a_bounded_number_of_buckets() -> None:
    c = WindowCounter()
    for i in range(3 * 24 * 60):  # one add a minute for three days
        c.add("k", 1, now_ms=T0 + i * MINUTE_MS)
    rings = c._keys["k"].rings
    assert all(len(r) <= most for r, most in zip(rings, (7, 61, 25), strict=True))
    now = T0 + (3 * 24 * 60 - 1) * MINUTE_MS
    assert c.window("k", HOUR_MS, now).sum in (60, 61)  # within one bucket of the exact window
    assert 24 * 60 <= c.window("k", DAY_MS, now).sum <= 25 * 60


def test_counters_mark_the_totals_at_each_new_day() -> None:
    c = Counters()
    c.mark_day("2026-11-24", put_total=0)  # at start: nothing before today
    c.get_messages = 7
    c.mark_day("2026-11-24", put_total=10)  # same day: nothing changes
    assert (c.put_today_morning, c.put_yesterday_morning) == (0, 0)
    c.mark_day("2026-11-25", put_total=10)
    assert (c.put_today_morning, c.get_today_morning, c.put_yesterday_morning) == (10, 7, 0)
    c.get_messages = 9
    c.mark_day("2026-11-26", put_total=25)
    assert (c.put_today_morning, c.get_today_morning) == (25, 9)
    assert (c.put_yesterday_morning, c.get_yesterday_morning) == (10, 7)


def test_rate_sampler_rates_over_10s_1min_10min() -> None:
    r = RateSampler()
    assert r.text() == "0.0 0.0 0.0"  # no samples yet
    for i in range(601):  # 5 messages a second for the first 9 minutes, then none
        r.sample(5 * min(i, 540), now_ms=T0 + i * 1000)
    assert r.rate(10) == 0.0
    assert r.rate(60) == 0.0
    assert r.rate(600) == 5 * 540 / 600
    assert r.text() == f"0.0 0.0 {5 * 540 / 600}"
