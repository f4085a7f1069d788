"""``rmqadmin`` against the Apache RocketMQ broker: ``tests/integration/test_rmqadmin.py`` once more, the same
commands and checks, against the Apache peer (its name server and broker). Where a fact differs by broker the
base test says so (``is_apache``)."""

from __future__ import annotations

import tests.integration.test_rmqadmin as base
from tests.peers.conftest import rerun_against_apache

rerun_against_apache(base, globals())
admin = base.admin  # the fixture that finds the broker's cluster and name, now over the Apache ``broker``
