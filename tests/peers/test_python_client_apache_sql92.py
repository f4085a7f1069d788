"""rmq's Python client against the Apache broker: ``tests/integration/test_client_sql92.py`` (SQL92 push and
lite pull subscriptions, malformed expressions) once more, unchanged, against the Apache peer (which runs
with ``enablePropertyFilter=true``, as that module's rmq broker does)."""

from __future__ import annotations

import tests.integration.test_client_sql92 as base
from tests.peers.conftest import rerun_against_apache

# Not run here: it checks rmq's remark wording ("malformed"); the Apache broker answers the same code
# (SUBSCRIPTION_PARSE_FAILED, 23) with its parser's message.
rerun_against_apache(base, globals(), frozenset({"test_malformed_expression_fails_start"}))
