"""The official RocketMQ 5.x Node.js client (npm rocketmq-client-nodejs 1.0.8, unchanged): send and
SimpleConsumer receive / changeInvisibleDuration / ack against rmq's broker (its own gRPC endpoint) and
against Apache RocketMQ 5.5.0's proxy, results compared; and 4.x <-> 5.x cross consumption on both.

One node process per side (tests/peers/node/client5.js, the two sides run at once): two sends (tag, keys, a
property), then a SimpleConsumer receiving them and what rmq's 4.x producer sent; rmq's 4.x consumer reads
back what the Node.js producer stored.
"""

from __future__ import annotations

import json
import os
import subprocess
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from tests.peers.conftest import Peers, Peers5
from tests.peers.grpc5 import CROSS_4X, Side, apache_side, plain_record, pull, record, rmq_side, same, send_4x

CLIENT5_JS = Path(__file__).resolve().parent / "node" / "client5.js"


def _run_node(peers: Peers, home: Path, **args: Any) -> dict[str, Any]:
    home.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ, NODE_PATH=str(peers.libs.node5), HOME=str(home))
    r = subprocess.run(
        ["node", str(CLIENT5_JS), json.dumps(args)], capture_output=True, text=True, timeout=180, env=env
    )
    lines = [line for line in r.stdout.splitlines() if line.startswith("{")]
    assert lines, f"node printed no result (exit {r.returncode}):\n{r.stdout[-2000:]}\n{r.stderr[-3000:]}"
    result: dict[str, Any] = json.loads(lines[-1])
    assert r.returncode == 0 and "error" not in result, f"node client failed: {result}\n{r.stderr[-3000:]}"
    return result


def _run_side(side: Side, peers: Peers) -> dict[str, Any]:
    topic, cross = side.topic("N5n"), side.topic("N5c")
    send_4x(side, cross)
    result = _run_node(
        peers,
        peers.home / f"node5-{side.label}",
        endpoints=side.endpoints,
        topic=topic,
        crossTopic=cross,
        crossBodies=CROSS_4X,
        group=side.group("G5n"),
    )
    stored = sorted(pull(side.namesrv, topic, 2), key=lambda m: m.body)
    result["stored4x"] = [record(m) for m in stored]
    result["ids_kept"] = {m.body.decode(): m.msg_id == result["sent"][m.body.decode()] for m in stored}
    return result


@pytest.fixture(scope="module")
def node5(peers: Peers, peers5: Peers5) -> dict[str, dict[str, Any]]:
    """The scenario's results by side (the node processes run at once)."""
    sides = (rmq_side(peers), apache_side(peers5))
    with ThreadPoolExecutor(len(sides)) as pool:
        futures = {s.label: pool.submit(_run_side, s, peers) for s in sides}
        return {label: f.result() for label, f in futures.items()}


def test_node_simple_consumer_receives_what_the_node_producer_sent(node5: dict[str, dict[str, Any]]) -> None:
    received = same(node5, "received")
    assert same(node5, "changed") is True
    assert received["node-1"] == {
        "kind": "node",
        "tag": "TagN",
        "keys": ["n1", "n2"],
        "attempt": 1,
        "props": {"color": "blue"},
        "id_is_sent": True,
    }
    assert (received["node-2"]["tag"], received["node-2"]["keys"]) == ("TagM", [])


def test_node_sends_read_by_4x_consumer(node5: dict[str, dict[str, Any]]) -> None:
    """5.x -> 4.x: rmq's Remoting consumer reads the Node.js producer's messages, with their ids."""
    stored = same(node5, "stored4x")
    assert stored[0] == plain_record("node-1", "TagN", ["n1", "n2"], "blue")
    assert same(node5, "ids_kept") == {"node-1": True, "node-2": True}


def test_4x_sends_received_by_node_simple_consumer(node5: dict[str, dict[str, Any]]) -> None:
    """4.x -> 5.x: messages rmq's 4.x producer sent over Remoting reach the Node.js SimpleConsumer."""
    received = same(node5, "received")
    for body in CROSS_4X:
        assert received[body] == {
            "kind": "cross",
            "tag": "Tag4",
            "keys": ["k4"],
            "attempt": 1,
            "props": {"origin": "4x"},
            "id_is_sent": None,
        }
