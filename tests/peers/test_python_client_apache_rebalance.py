"""rmq's Python client against the Apache broker: ``tests/integration/test_client_rebalance.py`` (three push
consumers, one stops, one joins, while a producer sends; at-least-once, duplicates only around a rebalance,
the allocation settling to AllocateMessageQueueAveragely) once more, unchanged, against the Apache peer."""

from __future__ import annotations

import tests.integration.test_client_rebalance as base
from tests.peers.conftest import rerun_against_apache

rerun_against_apache(base, globals())
