"""Wiring of POP consumption: the processors of POP_MESSAGE, ACK_MESSAGE,
BATCH_ACK_MESSAGE and CHANGE_MESSAGE_INVISIBLETIME, the revive service and POP long polling, wired by
:class:`PopService` (the controller makes one per master broker)."""

from __future__ import annotations

import asyncio
import time

from rmq.broker.pop.polling import PopHoldService
from rmq.broker.pop.processors import PopProcessors
from rmq.broker.pop.revive import ReviveService
from rmq.broker.pop.wire import revive_topic
from rmq.broker.services import BrokerServices

__all__ = ["PopService"]


class PopService:
    def __init__(self, services: BrokerServices, loop: asyncio.AbstractEventLoop) -> None:
        cfg = services.config
        self.s = services
        self.topic = revive_topic(cfg.broker_cluster_name)
        self.revive = ReviveService(services, self.topic, cfg.revive_queue_num, cfg.config_dir)
        self.processors: PopProcessors
        self.holds = PopHoldService(
            loop,
            lambda topics: self.processors.topics_signature(topics),
            lambda held, expired: self.processors.resume(held, expired),
            cfg.max_pop_polling_size,
        )
        self.processors = PopProcessors(services, self.revive, self.holds)

    def tick(self) -> None:
        """The revive service's round, then the orderly queues that became visible again."""
        self.revive.tick()
        self.processors.wake_unblocked()

    def load(self) -> None:
        """Replay the revive topic (the store is open, nothing served yet)."""
        started = time.monotonic()
        self.revive.load()
        self.load_seconds = time.monotonic() - started
