"""The broker's SEND fast path counters (GET_BROKER_RUNTIME_INFO ``fastSend*``), for tests that check which
path answered a client's sends."""

from __future__ import annotations

import orjson
from rmq.common.codes import RequestCode
from rmq.remoting import create_request
from rmq.remoting.client import invoke_sync

REASONS = (
    "Header",
    "Topic",
    "QueueId",
    "Body",
    "Special",
    "Properties",
    "Batch",
    "Store",
    "Queued",
    "Acl",
    "Busy",
)


def fast_send_stats(broker_addr: str) -> dict[str, int]:
    """``taken``, ``messages``, ``declined``, one entry per decline reason (``Topic``, ``Queued``, ...), and
    ``uniq_dropped``: batches whose batch-level UNIQ_KEY the fast path dropped; ``spun_ms``: time the network
    thread polled instead of sleeping; ``pull_taken`` /
    ``pull_messages``: pulls the PULL fast path answered and the messages they returned."""
    r = invoke_sync(broker_addr, create_request(RequestCode.GET_BROKER_RUNTIME_INFO), 5000)
    assert r.code == 0, r.remark
    table = orjson.loads(r.body)["table"]
    out = {
        "taken": int(table["fastSendTaken"]),
        "messages": int(table["fastSendMessages"]),
        "declined": int(table["fastSendDeclined"]),
        "wakeups": int(table["netThreadWakeups"]),
        "spun_ms": int(table["netThreadSpinMillis"]),
        "uniq_dropped": int(table.get("fastSendBatchUniqKeysDropped", 0)),
        "pull_taken": int(table.get("fastPullTaken", 0)),
        "pull_messages": int(table.get("fastPullMessages", 0)),
    }
    for reason in REASONS:
        out[reason] = int(table.get("fastSendDeclined" + reason, 0))  # none without a network thread
    return out


def delta(before: dict[str, int], after: dict[str, int]) -> dict[str, int]:
    return {k: after[k] - before[k] for k in after}


def assert_taken(d: dict[str, int], requests: int, messages: int, new_topic: bool = False) -> None:
    """Every one of ``requests`` send requests (``messages`` messages) was answered by the fast path, except
    the first to a ``new_topic`` (Python creates and vets it) and those that arrived on a connection behind a
    send Python was still handling (``Queued``: behind that first send); nothing else declined."""
    others = {r: d[r] for r in REASONS if r not in ("Topic", "Queued") and d[r]}
    assert not others, f"the fast path declined sends: {d}"
    assert d["Topic"] == (1 if new_topic else 0), d
    assert d["taken"] + d["declined"] == requests, d
    assert d["taken"] >= 1, d
    assert d["wakeups"] >= 1, f"the network thread answered sends without waking up: {d}"
    if d["declined"] == 0:
        assert d["messages"] == messages, d


class FastSendProbe:
    """The counters before a test's sends; :meth:`assert_taken` checks the sends after them with
    :func:`assert_taken`. The Apache broker reruns rmq's client tests (its fixture's broker has
    ``is_apache``) and has no fast path: there the probe reads and asserts nothing."""

    def __init__(self, broker: object) -> None:
        self.addr: str = broker.broker_addr  # type: ignore[attr-defined]
        self.apache = bool(getattr(broker, "is_apache", False))
        self.before = None if self.apache else fast_send_stats(self.addr)

    def taken(self) -> int | None:
        """Sends the fast path answered since the probe was made (None against Apache)."""
        if self.before is None:
            return None
        return delta(self.before, fast_send_stats(self.addr))["taken"]

    def assert_taken(self, requests: int, messages: int, new_topic: bool = False) -> None:
        if self.before is not None:
            assert_taken(delta(self.before, fast_send_stats(self.addr)), requests, messages, new_topic)
