"""The network source's parts that need no broker nor Spark: option parsing, the split of queue ranges,
the sharing of maxOffsetsPerTrigger, checkpoint JSON, splitting a run of CommitLog records, and the
blocking client against a plain socket server."""

from __future__ import annotations

import itertools
import socket
import struct
import threading

import pytest

pytest.importorskip("pyspark")

from rmq.common.codes import RequestCode
from rmq.remoting.blocking import BlockingClient
from rmq.remoting.codec import FrameDecoder, encode
from rmq.remoting.command import create_request, create_response
from rmq.remoting.errors import RemotingConnectError, RemotingSendRequestError
from rmq.spark.network.cluster import BrokerGroup, QueueKey
from rmq.spark.network.offsets import from_json, to_json
from rmq.spark.network.options import parse_duration_ms, parse_network_options
from rmq.spark.network.planning import QueueRange, split_ranges
from rmq.spark.network.stream import share_budget
from rmq.spark.records import RecordRunError, record_offsets, record_spans

NS = {"nameServer": "127.0.0.1:9876", "topics": "T"}


def test_options_parse_and_name_the_option_at_fault() -> None:
    opts = {
        **NS,
        "nameServer": "a:1; b:2",
        "topics": "T, U,T",
        "maxTriggerDelay": "5m",
        "minOffsetsPerTrigger": "10",
        "startingOffsets": '{"T":{"b":{"3":7}}}',
    }
    spec = parse_network_options(opts)
    assert spec.name_servers == ("a:1", "b:2") and spec.topics == ("T", "U")
    assert spec.max_trigger_delay_ms == 300_000 and spec.starting == {"T": {"b": {3: 7}}}
    assert parse_network_options(NS, streaming=True).starting == "latest"
    assert parse_network_options(NS).starting == "earliest"
    assert not parse_network_options(NS).commit_group
    assert parse_network_options({**NS, "consumerGroup": "g"}).commit_group
    bad = [
        ({"nameServer": "", "topics": "T"}, "nameServer"),
        ({"nameServer": "nohost", "topics": "T"}, "nameServer"),
        ({"nameServer": "a:1"}, "topics and topicPattern"),
        ({**NS, "topicPattern": "x"}, "topics and topicPattern"),
        ({"nameServer": "a:1", "topicPattern": "("}, "topicPattern"),
        ({**NS, "pullBatchSize": "0"}, "pullBatchSize"),
        ({**NS, "pullBatchSize": "2000"}, "pullBatchSize"),
        ({**NS, "startingOffsets": "[1]"}, "startingOffsets"),
        ({**NS, "startingOffsets": '{"T":{"b":{"x":1}}}'}, "startingOffsets"),
        ({**NS, "endingOffsets": '{"T":{"b":{"1":-3}}}'}, "endingOffsets"),
        ({**NS, "startingTimestamp": "yesterday"}, "startingTimestamp"),
        ({**NS, "maxTriggerDelay": "5m"}, "minOffsetsPerTrigger"),
        ({**NS, "failOnDataLoss": "maybe"}, "failOnDataLoss"),
        ({**NS, "expressionType": "SQL92"}, "subExpression"),
        ({**NS, "accessKey": "a"}, "accessKey and secretKey"),
        ({**NS, "path": "/data"}, "nameServer"),
        ({**NS, "sliceSize": "1m"}, "slicesize"),
    ]
    for opts, needle in bad:
        with pytest.raises(ValueError) as e:
            parse_network_options(opts)
        assert needle in str(e.value), (opts, str(e.value))
    with pytest.raises(ValueError, match="endingOffsets"):
        parse_network_options({**NS, "endingOffsets": "latest"}, streaming=True)
    assert parse_duration_ms("250", "x") == 250 and parse_duration_ms("2h", "x") == 7_200_000


def test_split_ranges_reaches_min_partitions_and_covers_each_offset_once() -> None:
    g = BrokerGroup("b", ((0, "h:1"),))
    ranges = [QueueRange(QueueKey("T", "b", 0), g, 0, 100), QueueRange(QueueKey("T", "b", 1), g, 5, 7),
              QueueRange(QueueKey("T", "b", 2), g, 3, 3)]  # fmt: skip
    out = split_ranges(ranges, 9)
    assert len(out) == 9
    for q, lo, hi in ((0, 0, 100), (1, 5, 7)):
        pieces = sorted((r.start, r.end) for r in out if r.queue.queue_id == q)
        assert pieces[0][0] == lo and pieces[-1][1] == hi
        assert all(a[1] == b[0] for a, b in itertools.pairwise(pieces))
    assert len(split_ranges(ranges, 1000)) == 102  # every offset its own partition, no more
    assert split_ranges(ranges, None) == ranges[:2]


def test_share_budget() -> None:
    q = [QueueKey("T", "b", i) for i in range(3)]
    assert share_budget({q[0]: 5, q[1]: 1}, 100) == {q[0]: 5, q[1]: 1}
    got = share_budget({q[0]: 90, q[1]: 9, q[2]: 1}, 10)
    assert sum(got.values()) == 10 and got[q[0]] >= got[q[1]] >= got[q[2]]
    got = share_budget({q[0]: 1, q[1]: 1, q[2]: 1}, 2)
    assert sum(got.values()) == 2 and max(got.values()) == 1


def test_offsets_json_round_trip() -> None:
    offs = {QueueKey("T", "broker-b", 1): 9, QueueKey("T", "broker-a", 0): 3, QueueKey("U", "broker-a", 2): 0}
    j = to_json(offs)
    assert j == {"T": {"broker-a": {"0": 3}, "broker-b": {"1": 9}}, "U": {"broker-a": {"2": 0}}}
    assert from_json(j) == offs
    with pytest.raises(ValueError):
        from_json({"T": [1, 2]})


def _record(size: int, magic: int = 0xDAA320A7) -> bytes:
    return struct.pack(">iI", size, magic) + b"\x01" * (size - 8)


def test_record_spans() -> None:
    run = _record(40) + _record(60) + struct.pack(">iI", 64, 0xCBD43194) + b"\0" * 56
    assert record_spans(run) == [(0, 40), (40, 60)]
    assert record_spans(_record(40) + b"\0" * 30) == [(0, 40)]
    assert struct.unpack("<3i", record_offsets([(0, 40), (40, 60)])) == (0, 40, 100)
    with pytest.raises(RecordRunError, match="claims 500 bytes"):
        record_spans(_record(40) + struct.pack(">iI", 500, 0xDAA320A7) + b"x" * 20)
    with pytest.raises(RecordRunError, match="too short"):
        record_spans(_record(40) + b"\x05\x06")


def test_blocking_client_matches_answers_and_reports_failures() -> None:
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(1)
    port = srv.getsockname()[1]

    def serve() -> None:
        conn, _ = srv.accept()
        dec = FrameDecoder()
        while data := conn.recv(65536):
            for req in dec.feed(data):
                if req.code == RequestCode.GET_MAX_OFFSET:
                    # An unrelated frame first (a server request), then the answer.
                    conn.sendall(encode(create_request(RequestCode.HEART_BEAT)))
                    conn.sendall(encode(create_response(req, 0, None, {"offset": "42"})))
                else:
                    conn.close()
                    return

    t = threading.Thread(target=serve, daemon=True)
    t.start()
    with BlockingClient() as client:
        addr = f"127.0.0.1:{port}"
        resp = client.invoke(addr, create_request(RequestCode.GET_MAX_OFFSET, {"topic": "T"}), 5000)
        assert resp.ext_fields["offset"] == "42"
        with pytest.raises(RemotingSendRequestError, match="closed the connection"):
            client.invoke(addr, create_request(RequestCode.GET_MIN_OFFSET), 5000)
        srv.close()
        with pytest.raises(RemotingConnectError, match="cannot connect"):
            client.invoke(addr, create_request(RequestCode.GET_MIN_OFFSET), 5000)
    t.join(5)
