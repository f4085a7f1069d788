"""rmq's Python client against the Apache broker: ``tests/integration/test_client_tx.py`` (transactions whose
second phase is lost, and a broker killed between the phases)
once more, unchanged, against an Apache broker of each test's own that the test restarts."""

from __future__ import annotations

import tests.integration.test_client_tx as base
from tests.peers.conftest import rerun_with_restarts

rerun_with_restarts(base, globals())
