"""The handlers of MessagingService v2, one module per kind of RPC (Apache's proxy ``grpc/v2`` activities).

Each handler reads the caller from the metadata (``x-mq-client-id``, ``x-mq-namespace``, the HMAC
``authorization`` when ACL is on), answers a bad request with the response's ``status`` (the RPC succeeds,
as Apache's proxy answers) and leaves the broker's work to the broker (:mod:`rmq.proxy.brokers`).
:class:`rmq.proxy.service.MessagingService` puts them together.
"""
