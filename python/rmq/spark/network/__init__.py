"""The network source: ``spark.read/readStream.format("rocketmq")`` with ``nameServer`` and ``topics`` (or
``topicPattern``) reads a live cluster over the Remoting protocol, from anywhere the brokers can be reached.

Parts, one concern each: ``options`` (the options as one spec), ``cluster`` (the requests, over the blocking
client ``rmq.remoting.blocking``), ``planning`` (driver: queues, bounds, start/end offsets, partitions),
``reading`` (executor: the pull loop and the decoding), ``offsets`` (the checkpoint's per-queue JSON),
``source`` (batch reader) and ``stream`` (micro-batch reader). The store-direct source and this one share
the row schema and the decoder; this one adds ``broker_name``.
"""
