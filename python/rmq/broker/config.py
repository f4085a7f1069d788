"""Broker configuration under RocketMQ's property names.

Broker properties (`BrokerConfig`) live here; store properties (`MessageStoreConfig`) are passed
through to the Rust store, which validates them. Both come from a `broker.conf` (Java properties
syntax) and `-p KEY=VALUE` overrides; an unknown name or a bad value is a `ConfigError` naming it.
"""

from __future__ import annotations

import difflib
import ipaddress
import json
import os
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, fields
from typing import Any

from rmq._store import MessageStore, StoreConfigError, check_store_config
from rmq.broker.java_properties import JAVA_PROPERTIES, LEGACY_NAMES
from rmq.broker.metrics import parse_metrics_label
from rmq.common.netaddr import local_address
from rmq.remoting.tls import TlsClientSettings, TlsConfigError, TlsServerSettings

__all__ = [
    "RUNTIME_UPDATABLE",
    "BrokerConfig",
    "ConfigError",
    "UnknownPropertyError",
    "parse_properties_lines",
    "parse_properties_text",
    "property_kind",
]


METRICS_EXPORTER_TYPES: frozenset[str] = frozenset({"DISABLE", "PROM"})


class ConfigError(ValueError):
    """A configuration property is unknown or has a bad value."""


class UnknownPropertyError(ConfigError):
    """A property name neither rmq nor a Java 4.9 broker knows (``typo``: close to a known name)."""

    def __init__(self, key: str) -> None:
        hint = did_you_mean(key)
        super().__init__(f"unknown property {key!r}{hint}")
        self.key = key
        self.typo = bool(hint)


# Java property name -> python attribute name of BrokerConfig.
_NAMES: dict[str, str] = {
    "brokerName": "broker_name",
    "brokerClusterName": "broker_cluster_name",
    "brokerId": "broker_id",
    "brokerIP1": "broker_ip1",
    "listenPort": "listen_port",
    "namesrvAddr": "namesrv_addr",
    "brokerPermission": "broker_permission",
    "autoCreateTopicEnable": "auto_create_topic_enable",
    "autoCreateSubscriptionGroup": "auto_create_subscription_group",
    "defaultTopicQueueNums": "default_topic_queue_nums",
    "clusterTopicEnable": "cluster_topic_enable",
    "brokerTopicEnable": "broker_topic_enable",
    "traceTopicEnable": "trace_topic_enable",
    "longPollingEnable": "long_polling_enable",
    "shortPollingTimeMills": "short_polling_time_mills",
    "registerNameServerPeriod": "register_name_server_period",
    "rejectTransactionMessage": "reject_transaction_message",
    "flushConsumerOffsetInterval": "flush_consumer_offset_interval",
    "channelExpiredTimeout": "channel_expired_timeout",
    "regionId": "region_id",
    "traceOn": "trace_on",
    "defaultQueryMaxNum": "default_query_max_num",
    "maxMsgsNumBatch": "max_msgs_num_batch",
    "enablePropertyFilter": "enable_property_filter",
    "storeReplyMessageEnable": "store_reply_message_enable",
    "transactionTimeOut": "transaction_time_out",
    "transactionCheckInterval": "transaction_check_interval",
    "transactionCheckMax": "transaction_check_max",
    "brokerRole": "broker_role",
    "serverMaxInFlight": "server_max_in_flight",
    "bindAddress": "bind_address",
    "networkThread": "network_thread",
    "networkThreadSpinMicros": "network_thread_spin_micros",
    "timerMaxDelaySec": "timer_max_delay_sec",
    "logDir": "log_dir",
    "logFileMaxSize": "log_file_max_size",
    "logFileCount": "log_file_count",
    "statsLogInterval": "stats_log_interval",
    "haListenPort": "ha_listen_port",
    "haSendHeartbeatInterval": "ha_send_heartbeat_interval",
    "haHousekeepingInterval": "ha_housekeeping_interval",
    "haTransferBatchSize": "ha_transfer_batch_size",
    "haMasterAddress": "ha_master_address",
    "haSlaveFallbehindMax": "ha_slave_fallbehind_max",
    "slaveTimeout": "slave_timeout",
    "slaveReadEnable": "slave_read_enable",
    "accessMessageInMemoryMaxRatio": "access_message_in_memory_max_ratio",
    "offsetCheckInSlave": "offset_check_in_slave",
    "metricsExporterType": "metrics_exporter_type",
    "metricsPromExporterHost": "metrics_prom_exporter_host",
    "metricsPromExporterPort": "metrics_prom_exporter_port",
    "metricsLabel": "metrics_label",
    "aclEnable": "acl_enable",
    "aclFilePath": "acl_file_path",
    "rocketmqHome": "rocketmq_home",
    "innerClientAuthenticationCredentials": "inner_client_authentication_credentials",
    "dashboardPort": "dashboard_port",
    "grpcServerPort": "grpc_server_port",
    "grpcFastSendEnable": "grpc_fast_send_enable",
    "dashboardAdmin": "dashboard_admin",
    "reviveQueueNum": "revive_queue_num",
    "popFromRetryProbability": "pop_from_retry_probability",
    "enableRetryTopicV2": "enable_retry_topic_v2",
    "maxPopPollingSize": "max_pop_polling_size",
    "tls.server.mode": "tls_server_mode",
    "tls.server.certPath": "tls_server_cert_path",
    "tls.server.keyPath": "tls_server_key_path",
    "tls.server.keyPassword": "tls_server_key_password",
    "tls.server.trustCertPath": "tls_server_trust_cert_path",
    "tls.server.need.client.auth": "tls_server_need_client_auth",
    "tls.test.mode.enable": "tls_test_mode_enable",
    "tls.enable": "tls_enable",
    "tls.client.certPath": "tls_client_cert_path",
    "tls.client.keyPath": "tls_client_key_path",
    "tls.client.keyPassword": "tls_client_key_password",
    "tls.client.trustCertPath": "tls_client_trust_cert_path",
    "tls.client.authServer": "tls_client_auth_server",
    "tls.config.file": "tls_config_file",
    "aclRequireTls": "acl_require_tls",
    "brokerTakeoverAllowed": "broker_takeover_allowed",
    "brokerFastFailureEnable": "broker_fast_failure_enable",
    "waitTimeMillsInSendQueue": "wait_time_mills_in_send_queue",
    "osPageCacheBusyTimeOutMills": "os_page_cache_busy_time_out_mills",
}

# Secrets: never answered to GET_BROKER_CONFIG.
_SECRETS: frozenset[str] = frozenset(
    {"inner_client_authentication_credentials", "tls_server_key_password", "tls_client_key_password"}
)

BROKER_ROLES = ("ASYNC_MASTER", "SYNC_MASTER", "SLAVE")
# Longest spin of the network thread before it sleeps (`networkThreadSpinMicros`).
MAX_SPIN_MICROS = 1000

# Accepted for compatibility with existing broker.conf files; they tune Java thread pools or
# features rmq does not have, and have no effect.
IGNORED: frozenset[str] = frozenset(
    {
        "brokerIP2",
        "sendMessageThreadPoolNums",
        "pullMessageThreadPoolNums",
        "queryMessageThreadPoolNums",
        "adminBrokerThreadPoolNums",
        "clientManageThreadPoolNums",
        "consumerManageThreadPoolNums",
        "useReentrantLockWhenPutMessage",
        "sendThreadPoolQueueCapacity",
        "pullThreadPoolQueueCapacity",
        "transferMsgByHeap",
        "serverWorkerThreads",
        "serverSelectorThreads",
        "clientWorkerThreads",
        "transientStorePoolEnable",
        "fetchNamesrvAddrByAddressServer",
        "mapedFileSizeCommitLog",
    }
)

# Java switches for features rmq does not have, where running without the feature would not be what
# the file asks for: on, they stop the start with the reason; off, they are accepted like the rest.
REFUSED_WHEN_ON: dict[str, str] = {
    "enableDLegerCommitLog": "rmq does not implement DLedger; use brokerRole and brokerId",
}

# Properties UPDATE_BROKER_CONFIG may change at run time: none of them is a filesystem path or
# anything that runs code.
RUNTIME_UPDATABLE: frozenset[str] = frozenset(
    {
        "brokerPermission",
        "autoCreateTopicEnable",
        "autoCreateSubscriptionGroup",
        "defaultTopicQueueNums",
        "longPollingEnable",
        "shortPollingTimeMills",
        "rejectTransactionMessage",
        "defaultQueryMaxNum",
        "maxMsgsNumBatch",
        "transactionTimeOut",
        "transactionCheckInterval",
        "transactionCheckMax",
        "slaveReadEnable",
        "accessMessageInMemoryMaxRatio",
        "offsetCheckInSlave",
    }
)


def property_kind(key: str) -> str:
    """What UPDATE_BROKER_CONFIG makes of ``key``: ``"runtime"`` (rmq changes it while running),
    ``"fixed"`` (rmq implements it, read at start only), ``"not implemented"`` (a Java broker property
    rmq has no use for) or ``"unknown"``."""
    if key in RUNTIME_UPDATABLE:
        return "runtime"
    if key in _NAMES or key in STORE_KEYS:
        return "fixed"
    if key in IGNORED or key in JAVA_PROPERTIES or key in LEGACY_NAMES:
        return "not implemented"
    return "unknown"


def _is_specific(address: str) -> bool:
    """``address`` names one interface (not ``0.0.0.0``, ``::`` or empty)."""
    try:
        return not ipaddress.ip_address(address.strip("[]")).is_unspecified
    except ValueError:
        return bool(address)  # a host name


def _parse_bool(key: str, value: str) -> bool:
    v = value.strip().lower()
    if v in ("true", "1"):
        return True
    if v in ("false", "0"):
        return False
    raise ConfigError(f"{key}: {value!r} is not true or false")


@dataclass
class BrokerConfig:
    broker_name: str = field(default_factory=lambda: "broker-a")
    broker_cluster_name: str = "DefaultCluster"
    broker_id: int = 0
    broker_ip1: str = field(default_factory=local_address)
    listen_port: int = 10911
    namesrv_addr: str | None = None
    broker_permission: int = 6
    auto_create_topic_enable: bool = True
    auto_create_subscription_group: bool = True
    default_topic_queue_nums: int = 8
    cluster_topic_enable: bool = True
    broker_topic_enable: bool = True
    trace_topic_enable: bool = False
    long_polling_enable: bool = True
    short_polling_time_mills: int = 1000
    register_name_server_period: int = 30_000
    reject_transaction_message: bool = False
    flush_consumer_offset_interval: int = 5000
    channel_expired_timeout: int = 120_000
    region_id: str = "DefaultRegion"
    trace_on: bool = True
    default_query_max_num: int = 32
    max_msgs_num_batch: int = 64
    enable_property_filter: bool = False
    store_reply_message_enable: bool = True
    """Store reply messages (request-reply) after pushing them to the requester."""
    transaction_time_out: int = 6000
    transaction_check_interval: int = 60_000
    transaction_check_max: int = 15
    broker_role: str = "ASYNC_MASTER"
    """ASYNC_MASTER, SYNC_MASTER (a send is answered once a slave has its record) or SLAVE."""
    ha_listen_port: int = -1
    """The master's HA port (-1: listenPort + 1, as RocketMQ's broker sets it; 0: any free port)."""
    ha_send_heartbeat_interval: int = 5000
    ha_housekeeping_interval: int = 20_000
    ha_transfer_batch_size: int = 32 * 1024
    ha_master_address: str | None = None
    """A slave's master HA address, host:port (else learned from the name server's registration answer)."""
    ha_slave_fallbehind_max: int = 256 * 1024 * 1024
    slave_timeout: int = 3000
    """How long a SYNC_MASTER send waits for a slave's ack before FLUSH_SLAVE_TIMEOUT (RocketMQ 4.9's
    `slaveTimeout`; releases before 4.9 waited `syncFlushTimeout`)."""
    slave_read_enable: bool = False
    """Pull answers suggest the slave (the group's ``whichBrokerWhenConsumeSlowly``) when the data pulled is
    no longer in memory, else the group's ``brokerId``; off, they suggest the master."""
    access_message_in_memory_max_ratio: int = 40
    """The share of physical memory (percent) the CommitLog's newest bytes are taken to stay cached in: a
    pull reading further back than that from the CommitLog's end is "not in memory" (RocketMQ's
    MessageStoreConfig property, read by rmq's pull processor)."""
    offset_check_in_slave: bool = False
    """A slave corrects a consumer's bad pull offset (PULL_OFFSET_MOVED) only when on; off, it answers
    PULL_RETRY_IMMEDIATELY suggesting the group's ``brokerId`` (a slave behind its master must not move
    offsets back)."""
    server_max_in_flight: int = 10_000
    timer_max_delay_sec: int = 3 * 86_400
    """Longest delay a timer message may ask for (RocketMQ 5.x's `timerMaxDelaySec`)."""
    bind_address: str = "0.0.0.0"
    """Interface the broker (and an embedded name server) listens on (rmq's own property)."""
    network_thread: bool = True
    """Serve the broker port from the Rust network thread, which answers plain sends without Python
    (rmq's own property; false: the asyncio server handles every request)."""
    network_thread_spin_micros: int = 50
    """How long (µs) the network thread polls for work before it sleeps, while requests arrive
    steadily: waking a sleeping CPU costs every request of a client with few in flight (rmq's own
    property; 0: sleep at once, at most 1000)."""
    log_dir: str = ""
    """Directory of ``broker.log`` (rmq's own property; empty: ``~/logs/rmqlogs``)."""
    log_file_max_size: int = 128 * 1024 * 1024
    """Size in bytes at which ``broker.log`` is rotated (rmq's own property)."""
    log_file_count: int = 10
    """Rotated log files kept (rmq's own property)."""
    stats_log_interval: int = 60_000
    """Milliseconds between two statistics lines in the log (rmq's own property; 0: none)."""
    metrics_exporter_type: str = "DISABLE"
    """RocketMQ 5.x's ``metricsExporterType``: ``DISABLE`` (5.x's default too) or ``PROM`` (serve Prometheus
    metrics); 5.x's ``OTLP_GRPC`` and ``LOG`` are not implemented."""
    metrics_prom_exporter_host: str = ""
    """Address the metrics are served on (5.x's ``metricsPromExporterHost``; empty: ``brokerIP1``)."""
    metrics_prom_exporter_port: int = 5557
    """Port of ``/metrics`` (5.x's ``metricsPromExporterPort``; 0: any free port, logged)."""
    metrics_label: str = ""
    """Extra labels on every metric, ``key:value,key:value`` (5.x's ``metricsLabel``)."""
    acl_enable: bool = False
    """RocketMQ ACL 1.0: every request is checked against :attr:`acl_path` (the broker does not start
    when that file is missing or invalid)."""
    acl_file_path: str = ""
    """The ACL rules file (rmq's own property; empty: ``<rocketmqHome>/conf/plain_acl.yml``, as RocketMQ)."""
    rocketmq_home: str = field(default_factory=lambda: os.environ.get("ROCKETMQ_HOME", ""))
    """RocketMQ's home directory (default: the ``ROCKETMQ_HOME`` environment variable)."""
    inner_client_authentication_credentials: str = ""
    """``{"accessKey": "...", "secretKey": "..."}``: the account the broker signs its own requests to the
    name servers with (RocketMQ 5's property of the same name; RocketMQ 4.9 signs nothing)."""
    dashboard_port: int = -1
    """Port of the web dashboard (rmq's own property; -1: no dashboard, the default; 0: any free port,
    logged). It is served on ``bindAddress`` and reads the cluster through ``namesrvAddr``."""
    grpc_server_port: int = 8081
    """Port of the gRPC endpoint for RocketMQ 5.x clients (Apache's proxy property; -1: not served; 0: any
    free port, logged). ``python -m rmq.broker`` serves it on ``bindAddress`` (see :mod:`rmq.proxy`)."""
    grpc_fast_send_enable: bool = True
    """Let the gRPC port answer SendMessage calls of plain messages itself, in Rust, sending them to the
    brokers over Remoting (rmq's own property; false: every call goes to the Python endpoint). Only where the
    port takes TLS and plaintext clients (its default) and without ACL; any other call is the endpoint's."""
    dashboard_admin: bool = False
    """Let the dashboard reset offsets and resend dead-letter messages (rmq's own property; false:
    read-only)."""
    revive_queue_num: int = 8
    """POP: queues of the revive topic ``rmq_sys_REVIVE_LOG_<cluster>`` (RocketMQ 5.x's property; its
    checkpoints and acks are spread over them)."""
    pop_from_retry_probability: int = 20
    """POP: the percentage of pops that read the group's retry topic before the topic (5.x's property)."""
    enable_retry_topic_v2: bool = False
    """POP: retry topics named ``%RETRY%<group>+<topic>`` instead of ``%RETRY%<group>_<topic>`` (5.x)."""
    max_pop_polling_size: int = 100_000
    """POP: pops held for long polling at most; more are answered POLLING_FULL (5.x's property)."""
    tls_server_mode: str = "disabled"
    """RocketMQ's ``tls.server.mode`` for the broker port (and an embedded name server): ``disabled``,
    ``permissive`` (TLS and plaintext clients both served) or ``enforcing`` (TLS only). RocketMQ 4.9's
    default is permissive with a self-signed certificate; rmq's is disabled, and TLS needs a certificate."""
    tls_server_cert_path: str = ""
    """PEM certificate (chain) of the broker (``tls.server.certPath``)."""
    tls_server_key_path: str = ""
    """PEM private key of that certificate (``tls.server.keyPath``)."""
    tls_server_key_password: str = ""
    """Password of an encrypted ``tls.server.keyPath``."""
    tls_server_trust_cert_path: str = ""
    """PEM CAs that client certificates must chain to (``tls.server.trustCertPath``)."""
    tls_server_need_client_auth: str = "none"
    """``none``, ``optional`` or ``require`` a client certificate (``tls.server.need.client.auth``)."""
    tls_test_mode_enable: bool = True
    """RocketMQ's ``tls.test.mode.enable`` (its proxy's ``tlsTestModeEnable``), applied to the gRPC port only:
    with ``tls.server.mode`` disabled, the gRPC port also takes TLS clients, with a self-signed certificate
    made at start, as RocketMQ's proxy does by default (the official 5.x Java client connects over TLS unless
    told otherwise); false: plaintext only. The broker port's TLS always needs a certificate."""
    tls_enable: bool = False
    """The broker's own connections (name-server registration) use TLS (RocketMQ's ``tls.enable``)."""
    tls_client_cert_path: str = ""
    tls_client_key_path: str = ""
    tls_client_key_password: str = ""
    tls_client_trust_cert_path: str = ""
    tls_client_auth_server: bool = False
    """Check the name server's certificate against ``tls.client.trustCertPath`` (RocketMQ's default: no)."""
    acl_require_tls: bool = False
    """With ``aclEnable``: serve TLS connections only (``tls.server.mode=enforcing``, which this implies), on
    the broker port and the embedded name server's (rmq's own property). ACL 1.0's signature covers neither
    the request code nor a field boundary and nothing stops a replay; TLS keeps frames from being read and
    replayed. Needs ``tls.server.certPath`` / ``tls.server.keyPath``."""
    broker_takeover_allowed: bool = False
    """The embedded name server lets a registration replace a live one of the same brokerName/brokerId at
    another address (rmq's own property; false: refused until the old one unregisters, its connection
    closes or it expires; true: Apache's behaviour)."""
    broker_fast_failure_enable: bool = True
    """RocketMQ's fast failure: a send that waited too long in the broker, or met the page cache busy, is
    answered SYSTEM_BUSY at once and not stored (the next two properties; false: never)."""
    wait_time_mills_in_send_queue: int = 200
    """Longest a send may wait between being read and being handled, in ms; longer: SYSTEM_BUSY with
    ``[TIMEOUT_CLEAN_QUEUE]broker busy, ...`` (RocketMQ's property; read at start)."""
    os_page_cache_busy_time_out_mills: int = 1000
    """An append holding the CommitLog's put lock longer than this (ms) means the page cache is busy: sends
    meanwhile are answered SYSTEM_BUSY with ``[PC_SYNCHRONIZED]broker busy, ...`` (RocketMQ's
    MessageStoreConfig property; read at start)."""
    tls_config_file: str = ""
    """A properties file of ``tls.*`` settings, read where it is named (RocketMQ's ``tls.config.file``;
    rmq reads no file unless asked)."""
    # Store properties by their RocketMQ names (validated by the store when it opens).
    store: dict[str, str] = field(default_factory=dict)
    on_update: list[Callable[[dict[str, Any]], None]] = field(
        default_factory=list, init=False, repr=False, compare=False
    )
    """Called with the properties after every :meth:`update` (the broker's run-time changes); not a
    property, and not copied by ``dataclasses.replace``."""
    _ip1_given: bool = field(default=False, init=False, repr=False, compare=False)
    """``brokerIP1`` was set: a later ``bindAddress`` no longer changes it."""
    not_implemented: dict[str, str] = field(default_factory=dict, init=False, repr=False, compare=False)
    """Properties given that a Java broker reads but rmq does not implement (they have no effect),
    each with why; the broker lists them in one warning at start."""

    # --- building ----------------------------------------------------------------------------------
    def set(self, key: str, value: Any) -> None:
        """Set one property by its RocketMQ name."""
        key = key.strip()
        text = str(value).strip()
        if key in _NAMES:
            attr = _NAMES[key]
            current = getattr(self, attr)
            if isinstance(current, bool):
                setattr(self, attr, _parse_bool(key, text))
            elif isinstance(current, int):
                try:
                    setattr(self, attr, int(text))
                except ValueError:
                    raise ConfigError(f"{key}: {text!r} is not a whole number") from None
            else:
                optional = attr in ("namesrv_addr", "ha_master_address")
                setattr(self, attr, text or None if optional else text)
            if key == "brokerIP1":
                self._ip1_given = True
            elif key == "bindAddress" and not self._ip1_given and _is_specific(text):
                self.broker_ip1 = text  # listening on one address only: announce that one
            if key == "tls.config.file" and text:
                self._load_tls_file(text)
            if key in ("waitTimeMillsInSendQueue", "osPageCacheBusyTimeOutMills") and getattr(self, attr) < 0:
                raise ConfigError(f"{key}: {text!r} is negative (milliseconds, 0 or more)")
            spin = self.network_thread_spin_micros
            if key == "networkThreadSpinMicros" and not 0 <= spin <= MAX_SPIN_MICROS:
                raise ConfigError(f"{key}: {text!r} is out of range (µs, 0 to {MAX_SPIN_MICROS})")
            if key == "brokerRole" and text not in BROKER_ROLES:
                raise ConfigError(f"brokerRole: {text!r} is not one of {', '.join(BROKER_ROLES)}")
            if attr.startswith("metrics_"):
                self._check_metrics()
            return
        if key in STORE_KEYS:
            try:
                check_store_config({key: text})  # the store's rules are per property
            except StoreConfigError as e:
                raise ConfigError(str(e).removeprefix("invalid store configuration: ")) from None
            self.store[key] = text
            return
        if key in LEGACY_NAMES:
            self.not_implemented[key] = f"old spelling, ignored by Java 4.9 too; {LEGACY_NAMES[key]} is read"
            return
        if key in IGNORED and key not in REFUSED_WHEN_ON:
            if key in JAVA_PROPERTIES:
                _check_java_value(key, JAVA_PROPERTIES[key], text)
            self.not_implemented[key] = "no effect in rmq"
            return
        if key in REFUSED_WHEN_ON and _parse_bool(key, text):
            raise ConfigError(f"{key}=true: {REFUSED_WHEN_ON[key]}")
        if key in JAVA_PROPERTIES:
            _check_java_value(key, JAVA_PROPERTIES[key], text)
            self.not_implemented[key] = "not implemented by rmq"
            return
        raise UnknownPropertyError(key)

    def _load_tls_file(self, path: str) -> None:
        try:
            with open(os.path.expanduser(path), encoding="utf-8") as f:
                text = f.read()
        except OSError as e:
            raise ConfigError(f"tls.config.file: cannot read {path!r}: {e.strerror}") from None
        for number, k, v in parse_properties_lines(text):
            if not k.startswith("tls.") or k == "tls.config.file":
                raise ConfigError(f"tls.config.file {path}:{number}: {k!r} is not a tls.* setting")
            self.set(k, v)

    def load(self, entries: Iterable[tuple[str, str, str]], *, ignore_unknown: bool = False) -> None:
        """Set ``(where, key, value)`` entries (``where`` says which file and line, or which option),
        reporting every unknown name and bad value together in one :class:`ConfigError`.

        ``ignore_unknown`` (a ``broker.conf``): a name no Java 4.9 broker reads either is ignored, as Java
        ignores it, and listed in the start's one warning -- unless it is close to a known name (a typo
        of a property that would then silently keep its default), which stays an error."""
        errors = []
        for where, key, value in entries:
            try:
                self.set(key, value)
            except UnknownPropertyError as e:
                if ignore_unknown and not e.typo:
                    self.not_implemented[e.key] = "unknown to RocketMQ 4.9 too, ignored as Java ignores it"
                else:
                    errors.append(f"{where}: {e}")
            except ConfigError as e:
                errors.append(f"{where}: {e}")
        if errors:
            raise ConfigError("\n".join(errors))

    def update(self, props: dict[str, Any]) -> None:
        """Set properties by their RocketMQ names, then tell the :attr:`on_update` listeners."""
        for k, v in props.items():
            self.set(k, v)
        for listener in self.on_update:
            listener(props)

    # --- derived -----------------------------------------------------------------------------------
    @property
    def acl_path(self) -> str:
        """Where the ACL rules are read from (``""``: nowhere known)."""
        if self.acl_file_path:
            return os.path.expanduser(self.acl_file_path)
        if self.rocketmq_home:
            return os.path.join(os.path.expanduser(self.rocketmq_home), "conf", "plain_acl.yml")
        return ""

    def tls_server(self) -> TlsServerSettings:
        """The TLS settings of the broker port (and an embedded name server); ``aclRequireTls`` makes the
        mode ``enforcing``."""
        return TlsServerSettings(
            mode="enforcing" if self.acl_require_tls else self.tls_server_mode,
            cert_path=os.path.expanduser(self.tls_server_cert_path),
            key_path=os.path.expanduser(self.tls_server_key_path),
            key_password=self.tls_server_key_password,
            trust_cert_path=os.path.expanduser(self.tls_server_trust_cert_path),
            need_client_auth=self.tls_server_need_client_auth,
        )

    def tls_client(self) -> TlsClientSettings | None:
        """The TLS settings of the broker's own connections, or None with ``tls.enable=false``."""
        if not self.tls_enable:
            return None
        return TlsClientSettings(
            enable=True,
            trust_cert_path=os.path.expanduser(self.tls_client_trust_cert_path),
            verify_server=self.tls_client_auth_server,
            cert_path=os.path.expanduser(self.tls_client_cert_path),
            key_path=os.path.expanduser(self.tls_client_key_path),
            key_password=self.tls_client_key_password,
        )

    def inner_credentials(self) -> tuple[str, str] | None:
        """The broker's own account from :attr:`inner_client_authentication_credentials`, or None."""
        text = self.inner_client_authentication_credentials.strip()
        if not text:
            return None
        try:
            data = json.loads(text)
        except ValueError:
            raise ConfigError(
                'innerClientAuthenticationCredentials: not JSON like {"accessKey": "...", "secretKey": "..."}'
            ) from None
        ak = data.get("accessKey") if isinstance(data, dict) else None
        sk = data.get("secretKey") if isinstance(data, dict) else None
        if not isinstance(ak, str) or not isinstance(sk, str) or not ak or not sk:
            raise ConfigError("innerClientAuthenticationCredentials: needs an accessKey and a secretKey")
        return ak, sk

    @property
    def broker_addr(self) -> str:
        return f"{self.broker_ip1}:{self.listen_port}"

    @property
    def store_root(self) -> str:
        root = self.store.get("storePathRootDir") or os.path.join(os.path.expanduser("~"), "store")
        return os.path.expanduser(root)

    @property
    def config_dir(self) -> str:
        return os.path.join(self.store_root, "config")

    def namesrv_list(self) -> list[str]:
        if not self.namesrv_addr:
            return []
        return [a.strip() for a in self.namesrv_addr.split(";") if a.strip()]

    def store_config(self) -> dict[str, str]:
        cfg = dict(self.store)
        cfg["storePathRootDir"] = self.store_root
        cfg.setdefault("storeHost", f"{self.broker_ip1}:{self.listen_port}")
        return cfg

    @property
    def is_slave(self) -> bool:
        return self.broker_role == "SLAVE"

    @property
    def ha_port(self) -> int:
        """The HA port to listen on (0: any free port)."""
        if self.ha_listen_port >= 0:
            return self.ha_listen_port
        return self.listen_port + 1 if self.listen_port else 0

    @property
    def sync_flush(self) -> bool:
        return self.store.get("flushDiskType", "ASYNC_FLUSH") == "SYNC_FLUSH"

    @property
    def max_message_size(self) -> int:
        return int(self.store.get("maxMessageSize", 4 * 1024 * 1024))

    @property
    def sync_flush_timeout_ms(self) -> int:
        return int(self.store.get("syncFlushTimeout", 5000))

    def _check_metrics(self) -> None:
        if self.metrics_exporter_type not in METRICS_EXPORTER_TYPES:
            known = ", ".join(sorted(METRICS_EXPORTER_TYPES))
            hint = " (not implemented by rmq)" if self.metrics_exporter_type in ("OTLP_GRPC", "LOG") else ""
            raise ConfigError(f"metricsExporterType: {self.metrics_exporter_type!r}{hint}; rmq takes {known}")
        if not 0 <= self.metrics_prom_exporter_port <= 65535:
            raise ConfigError(f"metricsPromExporterPort: {self.metrics_prom_exporter_port} is not a TCP port")
        try:
            parse_metrics_label(self.metrics_label)
        except ValueError as e:
            raise ConfigError(str(e)) from None

    def validate(self) -> None:
        if not 0 <= self.listen_port <= 65535:
            raise ConfigError(f"listenPort: {self.listen_port} is not a TCP port")
        if self.is_slave:
            if self.broker_id <= 0:
                raise ConfigError("brokerId: a slave's brokerId must be > 0 (brokerRole=SLAVE)")
        else:
            self.broker_id = 0  # a master is brokerId 0, whatever was set (as RocketMQ's broker does)
        if not -1 <= self.ha_listen_port <= 65535:
            raise ConfigError(f"haListenPort: {self.ha_listen_port} is not a TCP port")
        if self.ha_transfer_batch_size < 1:
            raise ConfigError("haTransferBatchSize must be at least 1")
        if self.ha_master_address:
            host, _, port = self.ha_master_address.rpartition(":")
            if not host or not port.isdigit():
                raise ConfigError(f"haMasterAddress: {self.ha_master_address!r} is not host:port")
        for name in ("broker_name", "broker_cluster_name"):
            v = getattr(self, name)
            if not v:
                raise ConfigError(f"{name} must not be empty")
        for addr in self.namesrv_list():
            host, _, port = addr.rpartition(":")
            if not host or not port.isdigit():
                raise ConfigError(f"namesrvAddr: {addr!r} is not host:port")
        if self.log_file_max_size < 1024 or self.log_file_count < 1:
            raise ConfigError("logFileMaxSize must be at least 1024 bytes and logFileCount at least 1")
        if self.stats_log_interval < 0:
            raise ConfigError("statsLogInterval must not be negative")
        self._check_metrics()
        if not 1 <= self.revive_queue_num <= 998:
            raise ConfigError("reviveQueueNum must be 1..998")
        if not 0 <= self.pop_from_retry_probability <= 100:
            raise ConfigError("popFromRetryProbability must be a percentage, 0..100")
        if not 0 <= self.access_message_in_memory_max_ratio <= 100:
            raise ConfigError("accessMessageInMemoryMaxRatio must be a percentage, 0..100")
        if self.acl_enable and not self.acl_path:
            raise ConfigError("aclEnable=true needs aclFilePath (or rocketmqHome / ROCKETMQ_HOME)")
        self.inner_credentials()
        if not -1 <= self.grpc_server_port <= 65535:
            raise ConfigError(f"grpcServerPort: {self.grpc_server_port} is not a TCP port (-1: not served)")
        if not -1 <= self.dashboard_port <= 65535:
            raise ConfigError(f"dashboardPort: {self.dashboard_port} is not a TCP port (-1: no dashboard)")
        if self.acl_require_tls:
            self._check_acl_require_tls()
        try:
            self.tls_server().validate()
        except TlsConfigError as e:
            raise ConfigError(str(e)) from None
        if self.tls_server().mode == "enforcing" and not self.namesrv_list() and not self.tls_enable:
            what = "aclRequireTls=true" if self.acl_require_tls else "tls.server.mode=enforcing"
            raise ConfigError(
                f"{what} with the embedded name server: set tls.enable=true too (the broker registers "
                "with that name server over TLS)"
            )
        if self.default_topic_queue_nums < 1:
            raise ConfigError("defaultTopicQueueNums must be at least 1")
        try:
            check_store_config(self.store_config())
        except StoreConfigError as e:
            raise ConfigError(str(e)) from None

    def _check_acl_require_tls(self) -> None:
        if not self.acl_enable:
            raise ConfigError(
                "aclRequireTls=true needs aclEnable=true: it keeps ACL-signed requests off plaintext "
                "connections, and without ACL there are none"
            )
        if not (self.tls_server_cert_path and self.tls_server_key_path):
            raise ConfigError(
                "aclRequireTls=true needs TLS material: set tls.server.certPath and tls.server.keyPath "
                "(the broker then serves TLS connections only)"
            )
        if self.tls_server_mode == "permissive":
            raise ConfigError(
                "aclRequireTls=true serves TLS only (tls.server.mode=enforcing), but "
                "tls.server.mode=permissive is set: remove it or set it to enforcing"
            )

    def properties(self) -> dict[str, str]:
        """Every property as RocketMQ names it (for GET_BROKER_CONFIG)."""
        out: dict[str, str] = {}
        by_attr = {v: k for k, v in _NAMES.items()}
        for f in fields(self):
            if f.name == "store" or not f.init:
                continue
            v = getattr(self, f.name)
            if f.name in _SECRETS and v:
                v = "******"
            out[by_attr[f.name]] = (
                ("true" if v else "false") if isinstance(v, bool) else ("" if v is None else str(v))
            )
        out.update(self.store)
        return out


STORE_KEYS: frozenset[str] = frozenset(MessageStore.config_keys())
KNOWN_NAMES: frozenset[str] = frozenset(_NAMES) | STORE_KEYS | IGNORED | frozenset(JAVA_PROPERTIES)


def did_you_mean(key: str) -> str:
    """`` (did you mean 'x'?)`` for the known property name closest to ``key``, or ``""``."""
    by_lower = {name.lower(): name for name in KNOWN_NAMES}
    if key.lower() in by_lower:
        return f" (did you mean {by_lower[key.lower()]!r}?)"
    close = difflib.get_close_matches(key, sorted(KNOWN_NAMES), n=1, cutoff=0.8)
    return f" (did you mean {close[0]!r}?)" if close else ""


_JAVA_INT_RANGE = {"int": (-(2**31), 2**31 - 1), "long": (-(2**63), 2**63 - 1)}


def _check_java_value(key: str, java_type: str, text: str) -> None:
    """A value a property rmq does not implement must still be one its Java type takes."""
    if java_type == "boolean":
        _parse_bool(key, text)
    elif java_type in _JAVA_INT_RANGE:
        lo, hi = _JAVA_INT_RANGE[java_type]
        try:
            n = int(text)
        except ValueError:
            raise ConfigError(f"{key}: {text!r} is not a whole number") from None
        if not lo <= n <= hi:
            raise ConfigError(f"{key}: {text} is out of range for a Java {java_type}")


def parse_properties_lines(text: str) -> list[tuple[int, str, str]]:
    """Java properties syntax (the subset broker.conf files use): `key=value` or `key: value`
    lines, `#`/`!` comments, blank lines, backslash line continuation. Returns
    ``(line number, key, value)`` in file order (the line a continued entry starts on)."""
    out: list[tuple[int, str, str]] = []
    pending = ""
    start = 0
    for number, raw in enumerate(text.splitlines(), 1):
        line = pending + raw.strip()
        if not pending:
            start = number
        pending = ""
        if not line or line[0] in "#!":
            continue
        if line.endswith("\\"):
            pending = line[:-1]
            continue
        for i, ch in enumerate(line):
            if ch in "=:":
                out.append((start, line[:i].strip(), line[i + 1 :].strip()))
                break
        else:
            parts = line.split(None, 1)
            out.append((start, parts[0], parts[1] if len(parts) > 1 else ""))
    return out


def parse_properties_text(text: str) -> dict[str, str]:
    """:func:`parse_properties_lines` as a dict (a later line wins)."""
    return {key: value for _, key, value in parse_properties_lines(text)}
