"""The broker: RocketMQ 4.x semantics over the Rust store, served with the remoting layer.

`BrokerController` is the composition root; `python -m rmq.broker` runs one (with an embedded name
server unless `-n` names external ones).
"""

from rmq.broker.config import BrokerConfig, ConfigError
from rmq.broker.controller import BrokerController

__all__ = ["BrokerConfig", "BrokerController", "ConfigError"]
