"""rmq: a RocketMQ 4.x compatible message broker and client for Python, with a Rust store."""

__version__ = "0.1.0"
