"""rmq's Python client against the Apache broker: ``tests/integration/test_client_retry.py`` (retry delays
by reconsume times, the DLQ after ``max_reconsume_times``, broadcasting without retries) once more,
unchanged, against the Apache peer, whose delay levels 3, 4, 5 are the same 1 s, 2 s, 3 s."""

from __future__ import annotations

import tests.integration.test_client_retry as base
from tests.peers.conftest import rerun_against_apache

rerun_against_apache(base, globals())
