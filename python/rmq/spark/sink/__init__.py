"""The ``rocketmq`` sink: ``df.write`` / ``df.writeStream.format("rocketmq")``.

Options: :mod:`rmq.spark.sink.options`; columns: :mod:`rmq.spark.sink.columns`; the exactly-once commit
protocol (transactional half messages decided by a commit record in the query's checkpoint, which the
broker's check-back also reads): :mod:`rmq.spark.sink.commit`.
"""

from rmq.spark.sink.columns import SinkColumnError
from rmq.spark.sink.options import SinkOptionError
from rmq.spark.sink.send import SinkSendError, SinkTopicError
from rmq.spark.sink.writer import RocketMQStreamWriter, RocketMQWriter

__all__ = [
    "RocketMQStreamWriter",
    "RocketMQWriter",
    "SinkColumnError",
    "SinkOptionError",
    "SinkSendError",
    "SinkTopicError",
]
