"""``rmqadmin`` (also ``python -m rmq.admin``): mqadmin's commands and flags over :class:`rmq.client.Admin`.

Each command prints what Apache's ``mqadmin`` prints (the same columns), or one JSON document with ``--json``.
The exit codes are listed in :mod:`rmq.admin.base`. Command modules: :mod:`~rmq.admin.topic`,
:mod:`~rmq.admin.group`, :mod:`~rmq.admin.broker`, :mod:`~rmq.admin.message`, :mod:`~rmq.admin.acl`,
:mod:`~rmq.admin.views`, :mod:`~rmq.admin.namesrv`, :mod:`~rmq.admin.export`.
"""

from rmq.admin import acl, broker, dashboard, export, group, message, namesrv, topic, views
from rmq.admin.base import Exit, cli

__all__ = [
    "Exit",
    "acl",
    "broker",
    "cli",
    "dashboard",
    "export",
    "group",
    "main",
    "message",
    "namesrv",
    "topic",
    "views",
]


def main() -> None:
    cli(prog_name="rmqadmin")
