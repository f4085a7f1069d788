"""``rmqadmin`` (also ``python -m rmq.admin``): mqadmin's commands and flags over :class:`rmq.client.Admin`.

Each command prints what Apache's ``mqadmin`` prints (the same columns), or one JSON document with ``--json``.
The exit codes are listed in :mod:`rmq.admin.base`. Command modules: :mod:`~rmq.admin.topic`,
:mod:`~rmq.admin.group`, :mod:`~rmq.admin.broker`, :mod:`~rmq.admin.message`, :mod:`~rmq.admin.acl`.
"""

from rmq.admin import acl, broker, dashboard, group, message, topic
from rmq.admin.base import Exit, cli

__all__ = ["Exit", "acl", "broker", "cli", "dashboard", "group", "main", "message", "topic"]


def main() -> None:
    cli(prog_name="rmqadmin")
