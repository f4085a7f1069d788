"""A web dashboard for rmq and Apache RocketMQ clusters (like rocketmq-dashboard), served by ``rmq-broker``
(``dashboardPort``) or ``rmqadmin dashboard``: :mod:`~rmq.dashboard.server` (the JSON API and the page),
:mod:`~rmq.dashboard.views` (what each page shows, over :class:`rmq.client.Admin`),
:mod:`~rmq.dashboard.http` (a minimal HTTP/1.1 server)."""

from rmq.dashboard.server import Dashboard

__all__ = ["Dashboard"]
