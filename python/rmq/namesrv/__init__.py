"""The name server: broker registry and topic routes (``python -m rmq.namesrv`` runs one)."""

from rmq.namesrv.kv_config import KVConfigManager
from rmq.namesrv.route_table import RouteInfoManager
from rmq.namesrv.server import NameServer

__all__ = ["KVConfigManager", "NameServer", "RouteInfoManager"]
