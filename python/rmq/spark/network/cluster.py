"""The requests the network source sends, over one blocking Remoting client (no event loop).

Name-server requests (routes, the topic list) try each ``nameServer`` address in turn. Broker requests
name a broker group and go to its master (brokerId 0), then to its slaves when the master cannot be
reached. Every failure becomes a :class:`NetworkReadError` whose text names the option, topic, broker or
queue at fault.
"""

from __future__ import annotations

import logging
import ssl
from dataclasses import dataclass
from typing import Final

from rmq.acl.signing import RequestSigner
from rmq.common import fastjson
from rmq.common.codes import MASTER_ID, LanguageCode, PermName, PullSysFlag, RequestCode, ResponseCode
from rmq.common.route import TopicRouteData
from rmq.remoting.blocking import BlockingClient
from rmq.remoting.command import RemotingCommand, create_request
from rmq.remoting.errors import RemotingConnectError, RemotingSendRequestError, RemotingTimeoutError
from rmq.remoting.headers import header_long
from rmq.remoting.tls import TlsClientSettings, TlsConfigError
from rmq.spark.network.options import DEFAULT_GROUP, NetworkSpec

__all__ = [
    "TRANSPORT_ERRORS",
    "BrokerGroup",
    "ClusterClient",
    "DataLossError",
    "NetworkReadError",
    "PullAnswer",
    "QueueKey",
]

log = logging.getLogger(__name__)

_SUCCESS: Final = int(ResponseCode.SUCCESS)
_LANG: Final = int(LanguageCode.PYTHON)
TRANSPORT_ERRORS = (RemotingConnectError, RemotingSendRequestError, RemotingTimeoutError)
_ADMIN_TIMEOUT_MS: Final = 5000


class NetworkReadError(RuntimeError):
    """The network source cannot go on (the text says what and where)."""


class DataLossError(NetworkReadError):
    """Offsets a read needs were deleted by retention (``failOnDataLoss=true``)."""


@dataclass(frozen=True, order=True)
class QueueKey:
    """One MessageQueue: topic, broker group name and queue id."""

    topic: str
    broker: str
    queue_id: int

    def __str__(self) -> str:
        return f"topic {self.topic} broker {self.broker} queue {self.queue_id}"


@dataclass(frozen=True)
class BrokerGroup:
    """A broker group's name and its ``(brokerId, address)`` pairs, master first."""

    name: str
    addrs: tuple[tuple[int, str], ...]


@dataclass(frozen=True)
class PullAnswer:
    code: int
    next_offset: int
    min_offset: int
    max_offset: int
    suggest: int
    body: bytes | None
    remark: str | None


def _tls_context(spec: NetworkSpec) -> ssl.SSLContext | None:
    if not spec.tls:
        return None
    verify = spec.tls_verify if spec.tls_verify is not None else bool(spec.tls_ca)
    settings = TlsClientSettings(
        enable=True,
        trust_cert_path=spec.tls_ca or "",
        verify_server=verify,
        cert_path=spec.tls_cert or "",
        key_path=spec.tls_key or "",
    )
    try:
        return settings.context()
    except TlsConfigError as e:
        raise ValueError(f"options tlsCa / tlsCert / tlsKey: {e}") from None


def _refusal(what: str, response: RemotingCommand, addr: str | None) -> NetworkReadError:
    code = response.code
    where = f" ({addr})" if addr else ""
    if code == ResponseCode.NO_PERMISSION:
        return NetworkReadError(
            f"{what}: access denied{where}: {response.remark} (ACL: check options accessKey / secretKey"
            " and the account's permissions)"
        )
    if code == ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST:
        return NetworkReadError(
            f"{what}: {response.remark}{where} (option consumerGroup names the group the pulls use,"
            f" default {DEFAULT_GROUP}: create it, or let the broker create it:"
            " autoCreateSubscriptionGroup)"
        )
    return NetworkReadError(f"{what}: code {code}{where}: {response.remark}")


class ClusterClient:
    """Routes, offsets and pulls of the queues a spec reads (see the module doc)."""

    def __init__(self, spec: NetworkSpec) -> None:
        self.spec = spec
        signer = (
            RequestSigner(spec.access_key, spec.secret_key, spec.security_token) if spec.access_key else None
        )
        self.remoting = BlockingClient(
            connect_timeout_ms=min(spec.pull_timeout_ms, 3000),
            ssl_context=_tls_context(spec),
            rpc_hook=signer,
        )
        self._ns_index = 0

    def close(self) -> None:
        self.remoting.close()

    def __enter__(self) -> ClusterClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _request(self, code: int, fields: dict[str, str] | None = None) -> RemotingCommand:
        return create_request(code, fields, language=_LANG)

    # --- name server -----------------------------------------------------------------------------------

    def _namesrv(self, code: int, fields: dict[str, str] | None = None) -> RemotingCommand:
        servers = self.spec.name_servers
        failures = []
        for i in range(len(servers)):
            index = (self._ns_index + i) % len(servers)
            try:
                response = self.remoting.invoke(
                    servers[index], self._request(code, fields), _ADMIN_TIMEOUT_MS
                )
            except TRANSPORT_ERRORS as e:
                failures.append(str(e))
                continue
            self._ns_index = index
            return response
        raise NetworkReadError(
            f"no name server of option nameServer={';'.join(servers)} answers: {'; '.join(failures)}"
        )

    def topic_list(self) -> list[str]:
        """GET_ALL_TOPIC_LIST_FROM_NAMESERVER."""
        response = self._namesrv(RequestCode.GET_ALL_TOPIC_LIST_FROM_NAMESERVER)
        if response.code != _SUCCESS:
            raise _refusal("listing the topics (option topicPattern)", response, None)
        body = fastjson.loads(response.body) if response.body else {}
        return sorted(str(t) for t in body.get("topicList") or ())

    def route(self, topic: str) -> TopicRouteData:
        """GET_ROUTEINFO_BY_TOPIC; an unknown topic is an error naming it."""
        response = self._namesrv(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": topic})
        if response.code == ResponseCode.TOPIC_NOT_EXIST or (response.code == _SUCCESS and not response.body):
            raise NetworkReadError(
                f"topic {topic!r} does not exist: no route for it at name server"
                f" {';'.join(self.spec.name_servers)} (option topics)"
            )
        if response.code != _SUCCESS:
            raise _refusal(f"the route of topic {topic!r}", response, None)
        return TopicRouteData.from_json(response.body)  # type: ignore[arg-type]

    def queues(self, topic: str) -> dict[QueueKey, BrokerGroup]:
        """Every readable queue of `topic` and its broker group."""
        route = self.route(topic)
        groups = {
            bd.broker_name: BrokerGroup(bd.broker_name, tuple(sorted(bd.broker_addrs.items())))
            for bd in route.broker_datas
        }
        out: dict[QueueKey, BrokerGroup] = {}
        for qd in route.queue_datas:
            group = groups.get(qd.broker_name)
            if group is None or not group.addrs or not PermName.is_readable(qd.perm):
                continue
            for qid in range(qd.read_queue_nums):
                out[QueueKey(topic, qd.broker_name, qid)] = group
        return out

    # --- brokers ---------------------------------------------------------------------------------------

    def broker_call(
        self, group: BrokerGroup, what: str, code: int, fields: dict[str, str]
    ) -> RemotingCommand:
        """Send to the group's master, else to each slave in turn (only transport failures move on)."""
        failures = []
        for broker_id, addr in group.addrs:
            try:
                response = self.remoting.invoke(addr, self._request(code, dict(fields)), _ADMIN_TIMEOUT_MS)
            except TRANSPORT_ERRORS as e:
                failures.append(f"{'master' if broker_id == MASTER_ID else f'slave {broker_id}'}: {e}")
                continue
            if response.code != _SUCCESS:
                raise _refusal(what, response, addr)
            return response
        raise NetworkReadError(f"{what}: no broker of group {group.name} answers: {'; '.join(failures)}")

    def _offset(self, group: BrokerGroup, q: QueueKey, code: int, what: str, **extra: str) -> int:
        fields = {"topic": q.topic, "queueId": str(q.queue_id), "bname": q.broker, **extra}
        response = self.broker_call(group, f"{what} of {q}", code, fields)
        return int(header_long(response.ext_fields, "offset"))

    def min_offset(self, group: BrokerGroup, q: QueueKey) -> int:
        return self._offset(group, q, RequestCode.GET_MIN_OFFSET, "the min offset")

    def max_offset(self, group: BrokerGroup, q: QueueKey) -> int:
        return self._offset(group, q, RequestCode.GET_MAX_OFFSET, "the max offset")

    def search_offset(self, group: BrokerGroup, q: QueueKey, timestamp_ms: int) -> int:
        return self._offset(
            group,
            q,
            RequestCode.SEARCH_OFFSET_BY_TIMESTAMP,
            "the offset by time",
            timestamp=str(timestamp_ms),
        )

    def update_consumer_offset(self, group: BrokerGroup, q: QueueKey, offset: int) -> None:
        """UPDATE_CONSUMER_OFFSET of the spec's consumer group."""
        fields = {
            "consumerGroup": self.spec.consumer_group,
            "topic": q.topic,
            "queueId": str(q.queue_id),
            "commitOffset": str(offset),
            "bname": q.broker,
        }
        self.broker_call(
            group,
            f"committing offset {offset} of {q} for consumerGroup {self.spec.consumer_group}",
            RequestCode.UPDATE_CONSUMER_OFFSET,
            fields,
        )

    def pull(self, addr: str, q: QueueKey, offset: int, max_msgs: int) -> PullAnswer:
        """One PULL_MESSAGE (no long polling, no offset commit; the subscription travels with it, so the
        broker filters by the spec's expression without a registered consumer). Transport errors pass."""
        spec = self.spec
        fields = {
            "consumerGroup": spec.consumer_group,
            "topic": q.topic,
            "queueId": str(q.queue_id),
            "queueOffset": str(offset),
            "maxMsgNums": str(max_msgs),
            "sysFlag": str(PullSysFlag.build(False, False, True)),
            "commitOffset": "0",
            "suspendTimeoutMillis": "0",
            "subscription": spec.sub_expression,
            "subVersion": "0",
            "expressionType": spec.expression_type,
            "bname": q.broker,
        }
        response = self.remoting.invoke(
            addr, self._request(RequestCode.PULL_MESSAGE, fields), spec.pull_timeout_ms
        )
        ext = response.ext_fields
        if response.code not in (
            _SUCCESS,
            ResponseCode.PULL_NOT_FOUND,
            ResponseCode.PULL_RETRY_IMMEDIATELY,
            ResponseCode.PULL_OFFSET_MOVED,
        ):
            what = f"pulling {q} at offset {offset}"
            if response.code in (ResponseCode.SUBSCRIPTION_PARSE_FAILED, ResponseCode.SYSTEM_ERROR) and (
                spec.sub_expression != "*" or spec.expression_type != "TAG"
            ):
                what += f" with subExpression {spec.sub_expression!r} ({spec.expression_type})"
            raise _refusal(what, response, addr)
        return PullAnswer(
            response.code,
            int(header_long(ext, "nextBeginOffset", offset)),
            int(header_long(ext, "minOffset", 0)),
            int(header_long(ext, "maxOffset", 0)),
            int(header_long(ext, "suggestWhichBrokerId", MASTER_ID)),
            response.body if response.code == _SUCCESS else None,
            response.remark,
        )
