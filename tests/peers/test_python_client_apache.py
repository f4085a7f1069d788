"""rmq's own Python client against the Apache RocketMQ broker: ``tests/integration/test_client_broker.py``
(producer sends, push consumers clustering/broadcasting/orderly, lite pull assign/seek/commit and subscribe,
queries, shared client instances) run here once more, unchanged, with its ``broker`` fixture pointing at
the Apache name server and broker of the peers session instead of at rmq."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

import tests.integration.test_client_broker as base
from tests.peers.conftest import Peers

# A known difference, not run here: for a timestamp between two messages, SEARCH_OFFSET_BY_TIMESTAMP on the
# Apache 4.9 broker answers whichever message is nearer in time (ConsumeQueue.getOffsetInQueueByTime),
# rmq the first message stored at or after it (5.x's default, BoundaryType.LOWER). The test asserts rmq's.
DIFFERENT = {"test_search_offset_by_timestamp"}

# The module's tests and fixtures, collected here again; only `broker` below differs.
globals().update(
    {k: v for k, v in vars(base).items() if (k.startswith("test_") and k not in DIFFERENT) or k == "producer"}
)


@dataclass
class ApacheBroker:
    namesrv_addr: str
    broker_addr: str


@pytest.fixture(scope="module")
def broker(peers: Peers) -> ApacheBroker:
    return ApacheBroker(peers.apache.namesrv_addr, peers.apache.broker_addr)
