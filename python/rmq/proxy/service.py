"""MessagingService v2: the activities (:mod:`rmq.proxy.activities`) put together as grpcio's servicer."""

from __future__ import annotations

from rmq.proxy.activities.client import ClientActivity
from rmq.proxy.activities.consumer import ConsumerActivity
from rmq.proxy.activities.lite import LiteActivity
from rmq.proxy.activities.producer import ProducerActivity
from rmq.proxy.activities.route import RouteActivity
from rmq.proxy.auth import Authenticator
from rmq.proxy.brokers import Brokers
from rmq.proxy.clients import ClientRegistry
from rmq.proxy.pb import g


class MessagingService(
    RouteActivity,
    ClientActivity,
    ProducerActivity,
    ConsumerActivity,
    LiteActivity,
    g.MessagingServiceServicer,
):
    def __init__(self, brokers: Brokers, registry: ClientRegistry, auth: Authenticator | None) -> None:
        self.brokers = brokers
        self.registry = registry
        self.auth = auth
        brokers.on_check = self._on_check
