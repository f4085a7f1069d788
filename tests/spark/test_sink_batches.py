"""How the sink groups at-least-once rows into RocketMQ batches (``rmq.spark.sink.send._batches``): by
topic in row order, at most ``batchSize`` rows and ``BATCH_BYTES``, rows with a delay level, a delivery
time or a body too big for a batch alone, each batch with its first row's number. The rows reaching a real
broker through these batches are checked by ``test_sink.py`` (every row once, bodies by hash)."""

from __future__ import annotations

from rmq.client.message import Message
from rmq.spark.sink.columns import OutRow
from rmq.spark.sink.send import BATCH_BYTES, _batches


def row(topic: str, body: bytes = b"x", **props: str) -> OutRow:
    m = Message(topic, body)
    m.properties.update(props)
    return OutRow(m, None, None, None)


def shape(batches: list[tuple[int, list[OutRow]]]) -> list[tuple[int, str, int]]:
    return [(first, rows[0].message.topic, len(rows)) for first, rows in batches]


def test_rows_of_one_topic_in_batches_of_at_most_the_size() -> None:
    rows = [row("A") for _ in range(70)]
    assert shape(_batches(rows, 100, 32)) == [(100, "A", 32), (132, "A", 32), (164, "A", 6)]
    assert [r for _f, b in _batches(rows, 0, 32) for r in b] == rows  # every row once, in order


def test_a_new_topic_starts_a_new_batch() -> None:
    rows = [row("A"), row("A"), row("B"), row("A")]
    assert shape(_batches(rows, 0, 32)) == [(0, "A", 2), (2, "B", 1), (3, "A", 1)]


def test_delayed_timed_and_big_rows_go_alone() -> None:
    rows = [
        row("A"),
        row("A", DELAY="3"),
        row("A"),
        row("A", TIMER_DELIVER_MS="1700000000000"),
        row("A", b"y" * (BATCH_BYTES + 1)),
        row("A"),
        row("A"),
    ]
    assert shape(_batches(rows, 0, 32)) == [
        (0, "A", 1),
        (1, "A", 1),
        (2, "A", 1),
        (3, "A", 1),
        (4, "A", 1),
        (5, "A", 2),
    ]


def test_batches_stay_within_the_byte_bound() -> None:
    body = b"z" * (BATCH_BYTES // 4)
    rows = [row("A", body) for _ in range(9)]
    got = _batches(rows, 0, 32)
    assert [len(b) for _f, b in got] == [3, 3, 3]
    assert all(sum(len(r.message.body) for r in b) <= BATCH_BYTES for _f, b in got)
