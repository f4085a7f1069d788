"""The RocketMQ 5.x endpoint: MessagingService v2 over gRPC, translated to Remoting requests to the brokers.

Apache's proxy module in rmq's shape: :mod:`.service` has one handler per RPC and only translates;
:mod:`.brokers` is the Remoting side (routes from the name servers, sends, transactions, POP, heartbeats);
:mod:`.clients` the 5.x clients' sessions and Telemetry streams; :mod:`.messages` and :mod:`.route` the
conversions; :mod:`.server` the gRPC server. The protobuf modules are generated from the vendored
rocketmq-apis protos (:mod:`.pb`).
"""

from rmq.proxy.server import DEFAULT_GRPC_PORT, ProxyConfig, ProxyServer, ProxyThread

__all__ = ["DEFAULT_GRPC_PORT", "ProxyConfig", "ProxyServer", "ProxyThread"]
