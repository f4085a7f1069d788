"""rmq's Python client against the Apache broker: ``tests/integration/test_client_query.py`` (lookups by key,
unique key and offset id, after a clean stop and after kill -9 of the broker)
once more, unchanged, against an Apache broker of each test's own that the test restarts."""

from __future__ import annotations

import tests.integration.test_client_query as base
from tests.peers.conftest import rerun_with_restarts

rerun_with_restarts(base, globals())
