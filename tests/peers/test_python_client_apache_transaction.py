"""rmq's Python client against the Apache broker: ``tests/integration/test_client_transaction.py``
once more, unchanged, against the Apache peer."""

from __future__ import annotations

import tests.integration.test_client_transaction as base
from tests.peers.conftest import rerun_against_apache

rerun_against_apache(base, globals())
