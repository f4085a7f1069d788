"""rmq's own Python client against the Apache RocketMQ broker: ``tests/integration/test_client_broker.py``
(producer sends, push consumers clustering/broadcasting/orderly, lite pull assign/seek/commit and subscribe,
queries, shared client instances) and ``test_client_sql92.py`` run here once more, unchanged, with their
``broker`` fixture pointing at the Apache name server and broker of the peers session instead of rmq."""

from __future__ import annotations

import tests.integration.test_client_broker as base
from tests.peers.conftest import rerun_against_apache

# A known difference, not run here: for a timestamp between two messages, SEARCH_OFFSET_BY_TIMESTAMP on the
# Apache 4.9 broker answers whichever message is nearer in time (ConsumeQueue.getOffsetInQueueByTime),
# rmq the first message stored at or after it (5.x's default, BoundaryType.LOWER). The test asserts rmq's.
DIFFERENT = frozenset({"test_search_offset_by_timestamp"})

rerun_against_apache(base, globals(), DIFFERENT)
