"""``rmqadmin``'s later mqadmin commands against the Apache RocketMQ broker: ``tests/integration/
test_rmqadmin_rest.py`` once more, the same commands and checks, against the Apache peer (its name server and
broker)."""

from __future__ import annotations

import tests.integration.test_rmqadmin as admin_base
import tests.integration.test_rmqadmin_rest as base
from tests.peers.conftest import rerun_against_apache

rerun_against_apache(base, globals())
# the fixture that finds the broker's cluster and name, now over the Apache ``broker``
admin = admin_base.admin
