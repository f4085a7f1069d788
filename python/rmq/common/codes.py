"""Wire constants of the RocketMQ 4.x remoting protocol.

Everything here is a number or a name fixed by the protocol (REMOTING.md §1.6, §1.7, §2, §4.3, §4.4, §7.1,
§7.3, §7.4): request and response codes, language codes, the version we announce, permission bits, message and
pull sysflag bits, system topic names and message property keys.

The codec keeps ``code`` and ``language`` as plain ``int`` on the hot path; ``RequestCode`` and
``ResponseCode`` are ``IntEnum`` so they compare equal to those ints and print their names in logs.
"""

from __future__ import annotations

from enum import IntEnum
from typing import Final


class RequestCode(IntEnum):
    """Request codes (``CP/RequestCode.java``, REMOTING.md §2.1)."""

    SEND_MESSAGE = 10
    PULL_MESSAGE = 11
    QUERY_MESSAGE = 12
    QUERY_BROKER_OFFSET = 13
    QUERY_CONSUMER_OFFSET = 14
    UPDATE_CONSUMER_OFFSET = 15
    UPDATE_AND_CREATE_TOPIC = 17
    GET_ALL_TOPIC_CONFIG = 21
    GET_TOPIC_CONFIG_LIST = 22
    GET_TOPIC_NAME_LIST = 23
    UPDATE_BROKER_CONFIG = 25
    GET_BROKER_CONFIG = 26
    TRIGGER_DELETE_FILES = 27
    GET_BROKER_RUNTIME_INFO = 28
    SEARCH_OFFSET_BY_TIMESTAMP = 29
    GET_MAX_OFFSET = 30
    GET_MIN_OFFSET = 31
    GET_EARLIEST_MSG_STORETIME = 32
    VIEW_MESSAGE_BY_ID = 33
    HEART_BEAT = 34
    UNREGISTER_CLIENT = 35
    CONSUMER_SEND_MSG_BACK = 36
    END_TRANSACTION = 37
    GET_CONSUMER_LIST_BY_GROUP = 38
    CHECK_TRANSACTION_STATE = 39
    NOTIFY_CONSUMER_IDS_CHANGED = 40
    LOCK_BATCH_MQ = 41
    UNLOCK_BATCH_MQ = 42
    GET_ALL_CONSUMER_OFFSET = 43
    GET_ALL_DELAY_OFFSET = 45
    CHECK_CLIENT_CONFIG = 46
    UPDATE_AND_CREATE_ACL_CONFIG = 50
    DELETE_ACL_CONFIG = 51
    GET_BROKER_CLUSTER_ACL_INFO = 52
    UPDATE_GLOBAL_WHITE_ADDRS_CONFIG = 53
    GET_BROKER_CLUSTER_ACL_CONFIG = 54
    PUT_KV_CONFIG = 100
    GET_KV_CONFIG = 101
    DELETE_KV_CONFIG = 102
    REGISTER_BROKER = 103
    UNREGISTER_BROKER = 104
    GET_ROUTEINFO_BY_TOPIC = 105
    GET_BROKER_CLUSTER_INFO = 106
    UPDATE_AND_CREATE_SUBSCRIPTIONGROUP = 200
    GET_ALL_SUBSCRIPTIONGROUP_CONFIG = 201
    GET_TOPIC_STATS_INFO = 202
    GET_CONSUMER_CONNECTION_LIST = 203
    GET_PRODUCER_CONNECTION_LIST = 204
    WIPE_WRITE_PERM_OF_BROKER = 205
    GET_ALL_TOPIC_LIST_FROM_NAMESERVER = 206
    DELETE_SUBSCRIPTIONGROUP = 207
    GET_CONSUME_STATS = 208
    SUSPEND_CONSUMER = 209
    RESUME_CONSUMER = 210
    RESET_CONSUMER_OFFSET_IN_CONSUMER = 211
    RESET_CONSUMER_OFFSET_IN_BROKER = 212
    ADJUST_CONSUMER_THREAD_POOL = 213
    WHO_CONSUME_THE_MESSAGE = 214
    DELETE_TOPIC_IN_BROKER = 215
    DELETE_TOPIC_IN_NAMESRV = 216
    GET_KVLIST_BY_NAMESPACE = 219
    RESET_CONSUMER_CLIENT_OFFSET = 220
    GET_CONSUMER_STATUS_FROM_CLIENT = 221
    INVOKE_BROKER_TO_RESET_OFFSET = 222
    INVOKE_BROKER_TO_GET_CONSUMER_STATUS = 223
    GET_TOPICS_BY_CLUSTER = 224
    QUERY_TOPIC_CONSUME_BY_WHO = 300
    REGISTER_FILTER_SERVER = 301
    REGISTER_MESSAGE_FILTER_CLASS = 302
    QUERY_CONSUME_TIME_SPAN = 303
    GET_SYSTEM_TOPIC_LIST_FROM_NS = 304
    GET_SYSTEM_TOPIC_LIST_FROM_BROKER = 305
    CLEAN_EXPIRED_CONSUMEQUEUE = 306
    GET_CONSUMER_RUNNING_INFO = 307
    QUERY_CORRECTION_OFFSET = 308
    CONSUME_MESSAGE_DIRECTLY = 309
    SEND_MESSAGE_V2 = 310
    GET_UNIT_TOPIC_LIST = 311
    GET_HAS_UNIT_SUB_TOPIC_LIST = 312
    GET_HAS_UNIT_SUB_UNUNIT_TOPIC_LIST = 313
    CLONE_GROUP_OFFSET = 314
    VIEW_BROKER_STATS_DATA = 315
    CLEAN_UNUSED_TOPIC = 316
    GET_BROKER_CONSUME_STATS = 317
    UPDATE_NAMESRV_CONFIG = 318
    GET_NAMESRV_CONFIG = 319
    SEND_BATCH_MESSAGE = 320
    QUERY_CONSUME_QUEUE = 321
    QUERY_DATA_VERSION = 322
    RESUME_CHECK_HALF_MESSAGE = 323
    SEND_REPLY_MESSAGE = 324
    SEND_REPLY_MESSAGE_V2 = 325
    PUSH_REPLY_MESSAGE_TO_CLIENT = 326
    ADD_WRITE_PERM_OF_BROKER = 327
    GET_ALL_PRODUCER_INFO = 328
    DELETE_EXPIRED_COMMITLOG = 329
    # 5.x: a pull whose sysFlag has the lite-pull bit; Java 4.9.x clients send 11 for the same pull.
    LITE_PULL_MESSAGE = 361


class ResponseCode(IntEnum):
    """Response codes (``RemotingSysResponseCode.java`` + ``CP/ResponseCode.java``, REMOTING.md §2.2)."""

    SUCCESS = 0
    SYSTEM_ERROR = 1
    SYSTEM_BUSY = 2
    REQUEST_CODE_NOT_SUPPORTED = 3
    TRANSACTION_FAILED = 4
    FLUSH_DISK_TIMEOUT = 10
    SLAVE_NOT_AVAILABLE = 11
    FLUSH_SLAVE_TIMEOUT = 12
    MESSAGE_ILLEGAL = 13
    SERVICE_NOT_AVAILABLE = 14
    VERSION_NOT_SUPPORTED = 15
    NO_PERMISSION = 16
    TOPIC_NOT_EXIST = 17
    TOPIC_EXIST_ALREADY = 18
    PULL_NOT_FOUND = 19
    PULL_RETRY_IMMEDIATELY = 20
    PULL_OFFSET_MOVED = 21
    QUERY_NOT_FOUND = 22
    SUBSCRIPTION_PARSE_FAILED = 23
    SUBSCRIPTION_NOT_EXIST = 24
    SUBSCRIPTION_NOT_LATEST = 25
    SUBSCRIPTION_GROUP_NOT_EXIST = 26
    FILTER_DATA_NOT_EXIST = 27
    FILTER_DATA_NOT_LATEST = 28
    TRANSACTION_SHOULD_COMMIT = 200
    TRANSACTION_SHOULD_ROLLBACK = 201
    TRANSACTION_STATE_UNKNOW = 202
    TRANSACTION_STATE_GROUP_WRONG = 203
    NO_BUYER_ID = 204
    NOT_IN_CURRENT_UNIT = 205
    CONSUMER_NOT_ONLINE = 206
    CONSUME_MSG_TIMEOUT = 207
    NO_MESSAGE = 208
    UPDATE_AND_CREATE_ACL_CONFIG_FAILED = 209
    DELETE_ACL_CONFIG_FAILED = 210
    UPDATE_GLOBAL_WHITE_ADDRS_CONFIG_FAILED = 211
    FLOW_CONTROL = 215


class LanguageCode(IntEnum):
    """``LanguageCode`` (REMOTING.md §1.7). JSON headers carry the name, binary headers the byte."""

    JAVA = 0
    CPP = 1
    DOTNET = 2
    PYTHON = 3
    DELPHI = 4
    ERLANG = 5
    RUBY = 6
    OTHER = 7
    HTTP = 8
    GO = 9
    PHP = 10
    OMS = 11
    RUST = 12


class SerializeType(IntEnum):
    """High byte of the frame's header word (REMOTING.md §1.1)."""

    JSON = 0
    ROCKETMQ = 1


# --- versions (REMOTING.md §1.6): ordinals of Java's MQVersion.Version -------------------------------------
V3_0_11: Final = 37
"""From this version on REGISTER_BROKER carries a RegisterBrokerBody (before: TopicConfigSerializeWrapper)."""
V3_4_9: Final = 121
V4_0_0: Final = 213
V4_1_0_SNAPSHOT: Final = 232
V4_6_0: Final = 333
V4_9_4: Final = 401
V4_9_8: Final = 409
RMQ_VERSION: Final = V4_9_8
"""The version every command we send carries (V4_9_8)."""
RMQ_VERSION_DESC: Final = "V4_9_8"

# --- remoting flag bits (REMOTING.md §1.4) -----------------------------------------------------------------
FLAG_RESPONSE: Final = 0x1
FLAG_ONEWAY: Final = 0x2

# --- ids and namespaces -----------------------------------------------------------------------------------
MASTER_ID: Final = 0
"""brokerId of a master broker."""
NAMESPACE_ORDER_TOPIC_CONFIG: Final = "ORDER_TOPIC_CONFIG"
"""KV-config namespace holding ``topic -> "brokerName:queueNum;..."`` for ordered topics."""


class PermName:
    """Topic / broker permission bits (``C/constant/PermName.java``, REMOTING.md §7.1)."""

    PRIORITY: Final = 0x8
    READ: Final = 0x4
    WRITE: Final = 0x2
    INHERIT: Final = 0x1

    @staticmethod
    def is_readable(perm: int) -> bool:
        return (perm & PermName.READ) == PermName.READ

    @staticmethod
    def is_writeable(perm: int) -> bool:
        return (perm & PermName.WRITE) == PermName.WRITE

    @staticmethod
    def is_inherited(perm: int) -> bool:
        return (perm & PermName.INHERIT) == PermName.INHERIT

    @staticmethod
    def to_string(perm: int) -> str:
        """Java's ``PermName.perm2String``: e.g. 6 -> ``"RW-"``."""
        return (
            ("R" if perm & PermName.READ else "-")
            + ("W" if perm & PermName.WRITE else "-")
            + ("X" if perm & PermName.INHERIT else "-")
        )


class MessageSysFlag:
    """Message sysFlag bits (``C/sysflag/MessageSysFlag.java``, REMOTING.md §4.4)."""

    COMPRESSED_FLAG: Final = 0x1
    MULTI_TAGS_FLAG: Final = 0x2
    TRANSACTION_NOT_TYPE: Final = 0x0
    TRANSACTION_PREPARED_TYPE: Final = 0x4
    TRANSACTION_COMMIT_TYPE: Final = 0x8
    TRANSACTION_ROLLBACK_TYPE: Final = 0xC
    BORNHOST_V6_FLAG: Final = 0x10
    STOREHOSTADDRESS_V6_FLAG: Final = 0x20
    NEED_UNWRAP_FLAG: Final = 0x40
    INNER_BATCH_FLAG: Final = 0x80
    COMPRESSION_TYPE_MASK: Final = 0x700
    COMPRESSION_LZ4: Final = 0x100
    COMPRESSION_ZSTD: Final = 0x200
    COMPRESSION_ZLIB: Final = 0x300
    TRANSACTION_TYPE_MASK: Final = 0xC

    @staticmethod
    def transaction_type(sys_flag: int) -> int:
        return sys_flag & MessageSysFlag.TRANSACTION_TYPE_MASK

    @staticmethod
    def reset_transaction_type(sys_flag: int, tran_type: int) -> int:
        return (sys_flag & ~MessageSysFlag.TRANSACTION_TYPE_MASK) | tran_type


class PullSysFlag:
    """PULL_MESSAGE sysFlag bits (``C/sysflag/PullSysFlag.java``, REMOTING.md §7.3)."""

    COMMIT_OFFSET: Final = 0x1
    SUSPEND: Final = 0x2
    SUBSCRIPTION: Final = 0x4
    CLASS_FILTER: Final = 0x8
    LITE_PULL_MESSAGE: Final = 0x10

    @staticmethod
    def build(commit_offset: bool, suspend: bool, subscription: bool, class_filter: bool = False) -> int:
        flag = 0
        if commit_offset:
            flag |= PullSysFlag.COMMIT_OFFSET
        if suspend:
            flag |= PullSysFlag.SUSPEND
        if subscription:
            flag |= PullSysFlag.SUBSCRIPTION
        if class_filter:
            flag |= PullSysFlag.CLASS_FILTER
        return flag

    @staticmethod
    def clear_commit_offset(sys_flag: int) -> int:
        return sys_flag & ~PullSysFlag.COMMIT_OFFSET


class TopicSysFlag:
    """Topic sysFlag bits (``C/sysflag/TopicSysFlag.java``): unit-mode markers carried in QueueData."""

    UNIT: Final = 0x1
    UNIT_SUB: Final = 0x2


# --- system topics and groups (REMOTING.md §7.1, §7.4, ``TopicValidator``, ``MixAll``) -------------------
AUTO_CREATE_TOPIC_KEY_TOPIC: Final = "TBW102"
SCHEDULE_TOPIC: Final = "SCHEDULE_TOPIC_XXXX"
BENCHMARK_TOPIC: Final = "BenchmarkTest"
TRANS_HALF_TOPIC: Final = "RMQ_SYS_TRANS_HALF_TOPIC"
TRANS_OP_HALF_TOPIC: Final = "RMQ_SYS_TRANS_OP_HALF_TOPIC"
TRANS_CHECK_MAX_TIME_TOPIC: Final = "TRANS_CHECK_MAX_TIME_TOPIC"
TRACE_TOPIC: Final = "RMQ_SYS_TRACE_TOPIC"
SELF_TEST_TOPIC: Final = "SELF_TEST_TOPIC"
OFFSET_MOVED_EVENT: Final = "OFFSET_MOVED_EVENT"
SYSTEM_TOPIC_PREFIX: Final = "rmq_sys_"
REPLY_TOPIC_POSTFIX: Final = "REPLY_TOPIC"
RETRY_GROUP_TOPIC_PREFIX: Final = "%RETRY%"
DLQ_GROUP_TOPIC_PREFIX: Final = "%DLQ%"

CLIENT_INNER_PRODUCER_GROUP: Final = "CLIENT_INNER_PRODUCER"
SELF_TEST_PRODUCER_GROUP: Final = "SELF_TEST_P_GROUP"
SELF_TEST_CONSUMER_GROUP: Final = "SELF_TEST_C_GROUP"
TOOLS_CONSUMER_GROUP: Final = "TOOLS_CONSUMER"
SCHEDULE_CONSUMER_GROUP: Final = "SCHEDULE_CONSUMER"
CID_SYS_RMQ_TRANS: Final = "CID_RMQ_SYS_TRANS"
CID_RMQ_SYS_PREFIX: Final = "CID_RMQ_SYS_"
DEFAULT_TRACE_REGION_ID: Final = "DefaultRegion"
UNIQUE_MSG_QUERY_FLAG: Final = "_UNIQUE_KEY_QUERY"

SYSTEM_TOPICS: Final[frozenset[str]] = frozenset(
    {
        AUTO_CREATE_TOPIC_KEY_TOPIC,
        SCHEDULE_TOPIC,
        BENCHMARK_TOPIC,
        TRANS_HALF_TOPIC,
        TRACE_TOPIC,
        TRANS_OP_HALF_TOPIC,
        TRANS_CHECK_MAX_TIME_TOPIC,
        SELF_TEST_TOPIC,
        OFFSET_MOVED_EVENT,
    }
)
"""``TopicValidator.SYSTEM_TOPIC_SET`` of 4.9.8."""

NOT_ALLOWED_SEND_TOPICS: Final[frozenset[str]] = frozenset(
    {
        SCHEDULE_TOPIC,
        TRANS_HALF_TOPIC,
        TRANS_OP_HALF_TOPIC,
        TRANS_CHECK_MAX_TIME_TOPIC,
        SELF_TEST_TOPIC,
        OFFSET_MOVED_EVENT,
    }
)
"""Topics clients may not send to (``TopicValidator.NOT_ALLOWED_SEND_TOPIC_SET``)."""


class MessageConst:
    """Message property keys (``C/message/MessageConst.java``, REMOTING.md §4.3)."""

    KEYS: Final = "KEYS"
    TAGS: Final = "TAGS"
    WAIT_STORE_MSG_OK: Final = "WAIT"
    DELAY_TIME_LEVEL: Final = "DELAY"
    RETRY_TOPIC: Final = "RETRY_TOPIC"
    REAL_TOPIC: Final = "REAL_TOPIC"
    REAL_QUEUE_ID: Final = "REAL_QID"
    TRANSACTION_PREPARED: Final = "TRAN_MSG"
    PRODUCER_GROUP: Final = "PGROUP"
    MIN_OFFSET: Final = "MIN_OFFSET"
    MAX_OFFSET: Final = "MAX_OFFSET"
    BUYER_ID: Final = "BUYER_ID"
    ORIGIN_MESSAGE_ID: Final = "ORIGIN_MESSAGE_ID"
    TRANSFER_FLAG: Final = "TRANSFER_FLAG"
    CORRECTION_FLAG: Final = "CORRECTION_FLAG"
    MQ2_FLAG: Final = "MQ2_FLAG"
    RECONSUME_TIME: Final = "RECONSUME_TIME"
    MSG_REGION: Final = "MSG_REGION"
    TRACE_SWITCH: Final = "TRACE_ON"
    UNIQ_CLIENT_MESSAGE_ID_KEYIDX: Final = "UNIQ_KEY"
    MAX_RECONSUME_TIMES: Final = "MAX_RECONSUME_TIMES"
    CONSUME_START_TIMESTAMP: Final = "CONSUME_START_TIME"
    TRANSACTION_PREPARED_QUEUE_OFFSET: Final = "TRAN_PREPARED_QUEUE_OFFSET"
    TRANSACTION_CHECK_TIMES: Final = "TRANSACTION_CHECK_TIMES"
    CHECK_IMMUNITY_TIME_IN_SECONDS: Final = "CHECK_IMMUNITY_TIME_IN_SECONDS"
    INSTANCE_ID: Final = "INSTANCE_ID"
    CORRELATION_ID: Final = "CORRELATION_ID"
    MESSAGE_REPLY_TO_CLIENT: Final = "REPLY_TO_CLIENT"
    MESSAGE_TTL: Final = "TTL"
    REPLY_MESSAGE_ARRIVE_TIME: Final = "ARRIVE_TIME"
    PUSH_REPLY_TIME: Final = "PUSH_REPLY_TIME"
    CLUSTER: Final = "CLUSTER"
    MESSAGE_TYPE: Final = "MSG_TYPE"
    INNER_MULTI_DISPATCH: Final = "INNER_MULTI_DISPATCH"
    INNER_MULTI_QUEUE_OFFSET: Final = "INNER_MULTI_QUEUE_OFFSET"
    TRANSACTION_ID: Final = "__transactionId__"
    START_DELIVER_TIME: Final = "__STARTDELIVERTIME"

    KEY_SEPARATOR: Final = " "
    NAME_VALUE_SEPARATOR: Final = "\u0001"
    PROPERTY_SEPARATOR: Final = "\u0002"


# --- POP consumption (RocketMQ 5.x ``RequestCode`` / ``ResponseCode``) --------------------------------------
# Plain ints: 5.x's POLLING_FULL (209) is the number 4.x gave UPDATE_AND_CREATE_ACL_CONFIG_FAILED.
POP_MESSAGE: Final = 200050
ACK_MESSAGE: Final = 200051
PEEK_MESSAGE: Final = 200052
CHANGE_MESSAGE_INVISIBLETIME: Final = 200053
BATCH_ACK_MESSAGE: Final = 200151
INVALID_PARAMETER: Final = 29
POLLING_FULL: Final = 209
POLLING_TIMEOUT: Final = 210
