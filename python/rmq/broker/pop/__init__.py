"""POP consumption (RocketMQ 5.x) over Remoting: the processors of POP_MESSAGE, ACK_MESSAGE,
BATCH_ACK_MESSAGE and CHANGE_MESSAGE_INVISIBLETIME (:mod:`.processors`), the revive service
(:mod:`.revive`), orderly POP (:mod:`.order`), long polling (:mod:`.polling`) and the wire formats
(:mod:`.wire`), wired by :class:`rmq.broker.pop.service.PopService`."""
