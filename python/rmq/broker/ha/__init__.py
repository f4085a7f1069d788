"""Master/slave replication, RocketMQ 4.x's HA protocol (HAService, HAConnection, HAClient).

On the master's `haListenPort` a slave connects and reports its CommitLog max offset as 8 bytes
big-endian (at start, after each append and every `haSendHeartbeatInterval`); the master streams its
CommitLog from that offset in frames of [8-byte physical offset, 4-byte size, bytes], and an empty
frame as heartbeat when idle. The slave appends the bytes verbatim (same offsets, same files) and its
dispatch builds the ConsumeQueues and the index as on the master.

- :mod:`.codec`: the frames (no I/O).
- :mod:`.master`: the master's HA service: accepts slaves, streams to each, tracks their acks.
- :mod:`.slave`: the slave's HA client: connects to the master, appends, reports its offset.
- :mod:`.responder`: SYNC_MASTER answers, held until a slave acknowledged their record.
"""
