"""The generated RocketMQ 5.x protobuf modules, imported in one place.

``d`` is ``apache/rocketmq/v2/definition.proto`` (Resource, Message, Settings, Code, ...), ``s`` is
``service.proto`` (the requests and responses) and ``g`` its gRPC stubs and servicer base.
"""

from __future__ import annotations

try:
    from rmq.proxy.v2 import definition_pb2 as d
    from rmq.proxy.v2 import service_pb2 as s
    from rmq.proxy.v2 import service_pb2_grpc as g
except ImportError as e:  # a source checkout before scripts/grpc-protos
    raise ImportError(
        f"rmq.proxy needs its generated protobuf modules (rmq/proxy/v2/*_pb2.py): {e}. In a source checkout "
        "run `scripts/grpc-protos` (needs grpcio-tools); an installed wheel carries them."
    ) from e

__all__ = ["d", "g", "s"]
