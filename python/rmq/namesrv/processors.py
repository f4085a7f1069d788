"""Name server request processors (Java ``DefaultRequestProcessor`` of 4.9.8, REMOTING.md §3.5).

All processors are plain functions (no awaiting), so the server runs them inline without a task. They read
only ``ctx.channel_id`` (to tie a broker to its connection) and ``ctx.remote_addr`` (logs), so tests call them
with any object carrying those two attributes.

Responses always carry strict JSON bodies: route ``brokerAddrs`` keys are quoted strings, which Java clients
(fastjson) and the C++ client (jsoncpp) both read -- unlike a 4.9.8 name server, which sends unquoted numeric
keys to requests with version < 401.
"""

from __future__ import annotations

import logging
import zlib
from collections.abc import Callable

from rmq.common import fastjson
from rmq.common.codes import NAMESPACE_ORDER_TOPIC_CONFIG, V3_0_11, RequestCode, ResponseCode
from rmq.common.ratelog import RefusalLog
from rmq.common.route import DataVersion, RegisterBrokerBody, TopicConfigSerializeWrapper
from rmq.namesrv.config import NamesrvConfig, NamesrvConfigError, parse_properties
from rmq.namesrv.kv_config import KVConfigManager
from rmq.namesrv.route_table import RegistrationRefused, RouteInfoManager
from rmq.remoting.command import RemotingCommand, create_response
from rmq.remoting.context import Processor, RequestContext
from rmq.remoting.headers import bool_text, header_bool, header_int, header_long, header_str

__all__ = ["NamesrvProcessors"]

log = logging.getLogger(__name__)

_SUCCESS = int(ResponseCode.SUCCESS)
_SYSTEM_ERROR = int(ResponseCode.SYSTEM_ERROR)
_TOPIC_NOT_EXIST = int(ResponseCode.TOPIC_NOT_EXIST)
_QUERY_NOT_FOUND = int(ResponseCode.QUERY_NOT_FOUND)
_NO_PERMISSION = int(ResponseCode.NO_PERMISSION)


def _topic_list(topics: list[str], broker_addr: str | None = None) -> bytes:
    body: dict[str, object] = {"topicList": topics}
    if broker_addr is not None:
        body["brokerAddr"] = broker_addr
    return fastjson.dumps(body)


class NamesrvProcessors:
    """The name server's processors over one route table, one KV config and its configuration."""

    def __init__(
        self, routes: RouteInfoManager, kv: KVConfigManager, config: NamesrvConfig | None = None
    ) -> None:
        self.routes = routes
        self.kv = kv
        self.config = config if config is not None else NamesrvConfig()
        self.refusals = RefusalLog(log, "broker (un)registrations")
        """Registrations refused to protect a live one (count and rate-limited WARN)."""

    def _refuse(
        self, ctx: RequestContext, request: RemotingCommand, e: RegistrationRefused
    ) -> RemotingCommand:
        self.refusals.refused(e.key, "refusing %s from connection %s: %s", e.key, ctx.remote_addr, e.remark)
        return create_response(request, _NO_PERMISSION, e.remark)

    def table(self) -> dict[int, Processor]:
        """Request code -> processor, for ``RemotingServer.register``."""
        handlers: dict[RequestCode, Callable[[RequestContext, RemotingCommand], RemotingCommand]] = {
            RequestCode.PUT_KV_CONFIG: self.put_kv_config,
            RequestCode.GET_KV_CONFIG: self.get_kv_config,
            RequestCode.DELETE_KV_CONFIG: self.delete_kv_config,
            RequestCode.QUERY_DATA_VERSION: self.query_data_version,
            RequestCode.REGISTER_BROKER: self.register_broker,
            RequestCode.UNREGISTER_BROKER: self.unregister_broker,
            RequestCode.GET_ROUTEINFO_BY_TOPIC: self.get_route_info_by_topic,
            RequestCode.GET_BROKER_CLUSTER_INFO: self.get_broker_cluster_info,
            RequestCode.WIPE_WRITE_PERM_OF_BROKER: self.wipe_write_perm_of_broker,
            RequestCode.ADD_WRITE_PERM_OF_BROKER: self.add_write_perm_of_broker,
            RequestCode.GET_ALL_TOPIC_LIST_FROM_NAMESERVER: self.get_all_topic_list,
            RequestCode.DELETE_TOPIC_IN_NAMESRV: self.delete_topic_in_namesrv,
            RequestCode.GET_KVLIST_BY_NAMESPACE: self.get_kv_list_by_namespace,
            RequestCode.GET_TOPICS_BY_CLUSTER: self.get_topics_by_cluster,
            RequestCode.GET_SYSTEM_TOPIC_LIST_FROM_NS: self.get_system_topic_list,
            RequestCode.GET_UNIT_TOPIC_LIST: self.get_unit_topic_list,
            RequestCode.GET_HAS_UNIT_SUB_TOPIC_LIST: self.get_has_unit_sub_topic_list,
            RequestCode.GET_HAS_UNIT_SUB_UNUNIT_TOPIC_LIST: self.get_has_unit_sub_ununit_topic_list,
            RequestCode.UPDATE_NAMESRV_CONFIG: self.update_namesrv_config,
            RequestCode.GET_NAMESRV_CONFIG: self.get_namesrv_config,
        }
        return {int(code): handler for code, handler in handlers.items()}

    # --- brokers ------------------------------------------------------------------------------------------

    def register_broker(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand:
        ext = request.ext_fields
        broker_name = header_str(ext, "brokerName")
        broker_addr = header_str(ext, "brokerAddr")
        cluster_name = header_str(ext, "clusterName")
        ha_server_addr = header_str(ext, "haServerAddr")
        broker_id = header_long(ext, "brokerId")
        compressed = header_bool(ext, "compressed", False)
        body_crc32 = header_int(ext, "bodyCrc32", 0)
        body = bytes(request.body) if request.body is not None else None

        if body_crc32 != 0 and (zlib.crc32(body or b"") & 0x7FFFFFFF) != body_crc32:
            log.warning("register broker %s from %s: body crc32 mismatch", broker_addr, ctx.remote_addr)
            return create_response(request, _SYSTEM_ERROR, "crc32 not match")

        try:
            if request.version >= V3_0_11:
                if body:
                    register_body = RegisterBrokerBody.decode(body, compressed)
                else:
                    register_body = RegisterBrokerBody(TopicConfigSerializeWrapper(DataVersion(0, 0)))
                wrapper = register_body.topic_config_wrapper
                filter_servers: list[str] | None = register_body.filter_server_list
            else:
                wrapper = (
                    TopicConfigSerializeWrapper.from_json(body)
                    if body
                    else TopicConfigSerializeWrapper(DataVersion(0, 0))
                )
                filter_servers = None
        except (ValueError, KeyError, TypeError, IndexError, AttributeError) as exc:
            return create_response(request, _SYSTEM_ERROR, f"Failed to decode RegisterBrokerBody: {exc}")

        try:
            result = self.routes.register_broker(
                cluster_name,
                broker_addr,
                broker_name,
                broker_id,
                ha_server_addr,
                wrapper,
                filter_servers,
                ctx.channel_id,
            )
        except RegistrationRefused as e:
            return self._refuse(ctx, request, e)
        fields: dict[str, str] = {}
        if result.ha_server_addr is not None:
            fields["haServerAddr"] = result.ha_server_addr
        if result.master_addr is not None:
            fields["masterAddr"] = result.master_addr
        return create_response(
            request, _SUCCESS, None, fields, self.kv.kv_list_json(NAMESPACE_ORDER_TOPIC_CONFIG)
        )

    def unregister_broker(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand:
        ext = request.ext_fields
        try:
            self.routes.unregister_broker(
                header_str(ext, "clusterName"),
                header_str(ext, "brokerAddr"),
                header_str(ext, "brokerName"),
                header_long(ext, "brokerId"),
                ctx.channel_id,
            )
        except RegistrationRefused as e:
            return self._refuse(ctx, request, e)
        return create_response(request, _SUCCESS)

    def query_data_version(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand:
        ext = request.ext_fields
        for key in ("brokerName", "clusterName", "brokerId"):
            header_str(ext, key)  # required by the protocol, unused here
        broker_addr = header_str(ext, "brokerAddr")
        data_version = DataVersion.from_json(bytes(request.body)) if request.body else DataVersion()
        changed = self.routes.is_broker_topic_config_changed(broker_addr, data_version)
        if not changed:
            self.routes.update_broker_info_update_timestamp(broker_addr)
        held = self.routes.query_broker_topic_config(broker_addr)
        return create_response(
            request,
            _SUCCESS,
            None,
            {"changed": bool_text(changed)},
            held.to_json() if held is not None else None,
        )

    def wipe_write_perm_of_broker(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand:
        broker_name = header_str(request.ext_fields, "brokerName")
        count = self.routes.wipe_write_perm_of_broker(broker_name)
        log.info(
            "wiped write perm of broker %s (%d topics), requested by %s", broker_name, count, ctx.remote_addr
        )
        return create_response(request, _SUCCESS, None, {"wipeTopicCount": str(count)})

    def add_write_perm_of_broker(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand:
        broker_name = header_str(request.ext_fields, "brokerName")
        count = self.routes.add_write_perm_of_broker(broker_name)
        log.info(
            "added write perm of broker %s (%d topics), requested by %s", broker_name, count, ctx.remote_addr
        )
        return create_response(request, _SUCCESS, None, {"addTopicCount": str(count)})

    # --- routes and topics --------------------------------------------------------------------------------

    def get_route_info_by_topic(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand:
        topic = header_str(request.ext_fields, "topic")
        route = self.routes.pick_topic_route(topic)
        if route is None:
            return create_response(
                request, _TOPIC_NOT_EXIST, f"No topic route info in name server for the topic: {topic}"
            )
        if self.config.order_message_enable:
            route.order_topic_conf = self.kv.get(NAMESPACE_ORDER_TOPIC_CONFIG, topic)
        return create_response(request, _SUCCESS, body=route.to_json())

    def get_broker_cluster_info(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand:
        return create_response(request, _SUCCESS, body=self.routes.get_all_cluster_info().to_json())

    def get_all_topic_list(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand:
        return create_response(request, _SUCCESS, body=_topic_list(self.routes.get_all_topics()))

    def delete_topic_in_namesrv(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand:
        ext = request.ext_fields
        self.routes.delete_topic(header_str(ext, "topic"), header_str(ext, "clusterName", None))
        return create_response(request, _SUCCESS)

    def get_topics_by_cluster(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand:
        cluster = header_str(request.ext_fields, "cluster")
        return create_response(
            request, _SUCCESS, body=_topic_list(self.routes.get_topics_by_cluster(cluster))
        )

    def get_system_topic_list(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand:
        result = self.routes.get_system_topic_list()
        return create_response(request, _SUCCESS, body=_topic_list(result.topics, result.broker_addr))

    def get_unit_topic_list(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand:
        return create_response(request, _SUCCESS, body=_topic_list(self.routes.get_unit_topics()))

    def get_has_unit_sub_topic_list(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand:
        return create_response(request, _SUCCESS, body=_topic_list(self.routes.get_has_unit_sub_topics()))

    def get_has_unit_sub_ununit_topic_list(
        self, ctx: RequestContext, request: RemotingCommand
    ) -> RemotingCommand:
        return create_response(
            request, _SUCCESS, body=_topic_list(self.routes.get_has_unit_sub_ununit_topics())
        )

    # --- KV config ----------------------------------------------------------------------------------------

    def put_kv_config(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand:
        ext = request.ext_fields
        self.kv.put(header_str(ext, "namespace"), header_str(ext, "key"), header_str(ext, "value"))
        return create_response(request, _SUCCESS)

    def get_kv_config(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand:
        ext = request.ext_fields
        namespace = header_str(ext, "namespace")
        key = header_str(ext, "key")
        value = self.kv.get(namespace, key)
        if value is None:
            return create_response(
                request, _QUERY_NOT_FOUND, f"No config item, Namespace: {namespace} Key: {key}"
            )
        return create_response(request, _SUCCESS, None, {"value": value})

    def delete_kv_config(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand:
        ext = request.ext_fields
        self.kv.delete(header_str(ext, "namespace"), header_str(ext, "key"))
        return create_response(request, _SUCCESS)

    def get_kv_list_by_namespace(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand:
        namespace = header_str(request.ext_fields, "namespace")
        body = self.kv.kv_list_json(namespace)
        if body is None:
            return create_response(request, _QUERY_NOT_FOUND, f"No config item, Namespace: {namespace}")
        return create_response(request, _SUCCESS, body=body)

    # --- the name server's own config (rmq.namesrv.config) ------------------------------------------------

    def get_namesrv_config(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand:
        return create_response(request, _SUCCESS, body=self.config.text().encode())

    def update_namesrv_config(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand:
        if request.body is None:
            return create_response(request, _SUCCESS)  # nothing to change (as Apache answers)
        try:
            props = parse_properties(bytes(request.body).decode("utf-8"))
        except UnicodeDecodeError as e:
            log.warning("UPDATE_NAMESRV_CONFIG from %s refused: body is not UTF-8", ctx.remote_addr)
            return create_response(request, _SYSTEM_ERROR, f"config body is not UTF-8: {e}")
        try:
            changed = self.config.update(props)
        except NamesrvConfigError as e:
            log.warning("UPDATE_NAMESRV_CONFIG from %s refused (%s): %s", ctx.remote_addr, sorted(props), e)
            return create_response(request, _NO_PERMISSION if e.path else _SYSTEM_ERROR, str(e))
        for key, (old, new) in changed.items():
            log.info("name server config %s changed from %s to %s by %s", key, old, new, ctx.remote_addr)
        return create_response(request, _SUCCESS)
