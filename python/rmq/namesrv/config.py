"""The name server's configuration as ``mqadmin getNamesrvConfig`` / ``updateNamesrvConfig`` see it
(GET_NAMESRV_CONFIG 319 / UPDATE_NAMESRV_CONFIG 318), by RocketMQ's property names.

Listed: what rmq's name server has of Apache's ``NamesrvConfig`` and ``NettyServerConfig`` --
``listenPort``, ``kvConfigPath`` (when the KV config is kept in a file), ``orderMessageEnable``,
``serverChannelMaxIdleTimeSeconds`` -- and ``scanNotActiveBrokerInterval`` (RocketMQ 5's name for how
often silent brokers are looked for, ms). Only ``orderMessageEnable`` changes at run time: with it off a
route carries no ``orderTopicConf`` from the KV config. rmq turns it on by default (it always served the
order conf; a 4.9 name server needs ``orderMessageEnable=true``).

An update is refused, nothing applied, when it names a path (``kvConfigPath``, ``configStorePath``:
NO_PERMISSION ``Can not update config path``, as Apache) or, where Apache silently drops or keeps it
(SYSTEM_ERROR, naming the keys): a key no name server has, one rmq does not implement, one fixed at start,
or a value that is not of the property's type. rmq keeps run-time changes in memory (Apache also writes
them to ``configStorePath``, which it reads at the next start only when started with ``-c`` that file).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

__all__ = ["NamesrvConfig", "NamesrvConfigError", "parse_properties"]

PATH_KEYS: Final = frozenset({"kvConfigPath", "configStorePath"})
RUNTIME_KEYS: Final = frozenset({"orderMessageEnable"})
FIXED_KEYS: Final = frozenset(
    {"listenPort", "serverChannelMaxIdleTimeSeconds", "scanNotActiveBrokerInterval"}
)
# Apache 4.9's NamesrvConfig and NettyServerConfig properties rmq has no use for.
NOT_IMPLEMENTED: Final = frozenset(
    {
        "rocketmqHome",
        "productEnvName",
        "clusterTest",
        "serverWorkerThreads",
        "serverCallbackExecutorThreads",
        "serverSelectorThreads",
        "serverOnewaySemaphoreValue",
        "serverAsyncSemaphoreValue",
        "serverSocketSndBufSize",
        "serverSocketRcvBufSize",
        "writeBufferHighWaterMark",
        "writeBufferLowWaterMark",
        "serverSocketBacklog",
        "serverPooledByteBufAllocatorEnable",
        "useEpollNativeSelector",
    }
)


class NamesrvConfigError(ValueError):
    """An update the name server refuses; ``path`` tells a path key (NO_PERMISSION) from the rest."""

    def __init__(self, message: str, *, path: bool = False) -> None:
        super().__init__(message)
        self.path = path


def parse_properties(text: str) -> dict[str, str]:
    """``key=value`` (or ``key:value``) lines, as ``MixAll.properties2String`` writes them; ``#`` / ``!``
    comments and blank lines skipped; a later line wins."""
    out: dict[str, str] = {}
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line[0] in "#!":
            continue
        cut = min((i for i in (line.find("="), line.find(":")) if i >= 0), default=-1)
        key, value = (line[:cut], line[cut + 1 :]) if cut >= 0 else (line, "")
        out[key.strip()] = value.strip()
    return out


def _bool(key: str, text: str) -> bool:
    if text.lower() not in ("true", "false"):
        raise NamesrvConfigError(f"{key}: {text!r} is not a boolean (true or false)")
    return text.lower() == "true"


@dataclass
class NamesrvConfig:
    listen_port: int = 0
    """The port the name server listens on (set when it has started)."""
    kv_config_path: str | None = None
    """The KV config file (None: in memory only; then not listed)."""
    order_message_enable: bool = True
    """Routes carry the topic's ``orderTopicConf`` from the KV config (namespace ORDER_TOPIC_CONFIG)."""
    server_channel_max_idle_time_seconds: int | None = 120
    """A connection silent this long is closed (None: never; then not listed)."""
    scan_not_active_broker_interval: int = 10_000
    """How often brokers silent for two minutes are dropped (ms)."""

    def properties(self) -> dict[str, str]:
        """Every property by its RocketMQ name, as GET_NAMESRV_CONFIG lists them."""
        props = {
            "listenPort": str(self.listen_port),
            "orderMessageEnable": "true" if self.order_message_enable else "false",
            "scanNotActiveBrokerInterval": str(self.scan_not_active_broker_interval),
        }
        if self.kv_config_path is not None:
            props["kvConfigPath"] = self.kv_config_path
        if self.server_channel_max_idle_time_seconds is not None:
            props["serverChannelMaxIdleTimeSeconds"] = str(self.server_channel_max_idle_time_seconds)
        return dict(sorted(props.items()))

    def text(self) -> str:
        """:meth:`properties` as ``key=value`` lines (GET_NAMESRV_CONFIG's body)."""
        return "".join(f"{k}={v}\n" for k, v in self.properties().items())

    def update(self, props: dict[str, str]) -> dict[str, tuple[str, str]]:
        """Apply ``props`` (all or nothing); returns ``{key: (old, new)}`` of what changed. Raises
        :class:`NamesrvConfigError` naming every key it refuses."""
        paths = sorted(k for k in props if k in PATH_KEYS)
        if paths:
            raise NamesrvConfigError("Can not update config path", path=True)
        parts = [
            f"{what}: {', '.join(keys)}"
            for what, keys in (
                ("unknown name server properties", sorted(k for k in props if self._kind(k) == "unknown")),
                ("not implemented by rmq", sorted(k for k in props if k in NOT_IMPLEMENTED)),
                (
                    "these properties cannot be changed at run time",
                    sorted(k for k in props if k in FIXED_KEYS),
                ),
            )
            if keys
        ]
        if parts:
            raise NamesrvConfigError("; ".join(parts))
        new_order = (
            _bool("orderMessageEnable", props["orderMessageEnable"])
            if "orderMessageEnable" in props
            else None
        )
        before = self.properties()
        if new_order is not None:
            self.order_message_enable = new_order
        after = self.properties()
        return {k: (before[k], after[k]) for k in props if before.get(k) != after.get(k)}

    @staticmethod
    def _kind(key: str) -> str:
        if key in RUNTIME_KEYS:
            return "runtime"
        if key in FIXED_KEYS:
            return "fixed"
        if key in PATH_KEYS:
            return "path"
        if key in NOT_IMPLEMENTED:
            return "not implemented"
        return "unknown"
