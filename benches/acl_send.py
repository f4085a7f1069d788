"""Send throughput of the network thread's fast path with ACL on beside ACL off:
``python benches/acl_send.py [seconds] [rounds] [conns] [inflight] [--broker-cpus 0 --load-cpus 1]``.

For each setup a broker is started as its own process (``python -m rmq.broker``, embedded name server,
ASYNC_FLUSH) and ``benches/loadgen_c.c`` (compiled with ``$CC`` into a temporary directory; epoll,
pre-encoded frames) keeps ``conns`` x ``inflight`` SEND_MESSAGE_V2 requests of a 1 KiB body (``--body-size``)
in flight on a topic of 8 queues for ``seconds`` after a 2 s warm-up; the sends answered SUCCESS inside the
window per second are printed as a table, with the median of the rounds. Rounds alternate the setups, so a
change in the machine's other load touches both.

The same frames go to both setups: each is signed once by rmq's signer (``RequestSigner``, the Java client's
``AclClientRPCHook`` algorithm) with the account ``bench-app`` (PUB on the topic), and only what a signature
does not cover is patched per request (the opaque, and a 12-digit ``remark`` where the raw generator writes
its per-request counter), so with ACL on every request is a correctly signed send the broker must check.
ACL off ignores the two extra fields. The broker's ``fastSendAclChecked`` counter (GET_BROKER_RUNTIME_INFO)
shows that the ACL-on sends were checked and taken by the network thread.

``--broker-cpus`` / ``--load-cpus`` pin the broker (every thread) and the load generator to disjoint CPU sets
(``benches/pinning.py``); each side's CPU share over the window is printed (1.0 = one CPU busy throughout), so
a row shows whether the broker was the bottleneck and the generator was not.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import struct
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import orjson

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from rmq.acl import RequestSigner
from rmq.common.codes import RequestCode
from rmq.remoting import create_request
from rmq.remoting.client import invoke_sync

from benches.pinning import CpuShare, parse_cpus, pinned
from tests.brokerproc import BrokerProcess, start_broker

HERE = Path(__file__).resolve().parent
TOPIC = "AclBench"
QUEUES = 8
ADMIN = ("bench-admin", "bench-admin-secret")
APP = ("bench-app", "bench-app-secret")
RULES = f"""\
accounts:
  - accessKey: {ADMIN[0]}
    secretKey: {ADMIN[1]}
    admin: true
  - accessKey: {APP[0]}
    secretKey: {APP[1]}
    defaultTopicPerm: DENY
    defaultGroupPerm: DENY
    topicPerms:
      - {TOPIC}=PUB
"""
_PREFIX = struct.Struct(">ii")


def templates(path: Path, body: bytes) -> None:
    """``loadgen_c``'s template file (its header comment has the format): one signed frame per queue."""
    born = int(time.time() * 1000)
    out = [struct.pack("<i", QUEUES)]
    for q in range(QUEUES):
        ext = {"a": "BenchPG", "b": TOPIC, "c": "TBW102", "d": "4", "e": str(q), "f": "0", "g": str(born)}
        ext.update({"h": "0", "i": "UNIQ_KEY\x01AC1100010000000000000000\x02WAIT\x01true\x02TAGS\x01bench"})
        ext.update({"j": "0", "k": "false", "m": "false"})
        req = create_request(RequestCode.SEND_MESSAGE_V2, ext, body)
        RequestSigner(*APP)(req)
        header = {
            "code": 310,
            "extFields": req.ext_fields,
            "flag": 0,
            "language": "JAVA",
            "opaque": 1234567890,
            "remark": "UUUUUUUUUUUU",  # not signed: the generator's per-request counter goes here
            "serializeTypeCurrentRPC": "JSON",
            "version": 409,
        }
        hdr = orjson.dumps(header).replace(b'"opaque":1234567890', b'"opaque":OOOOOOOOOO')
        frame = _PREFIX.pack(4 + len(hdr) + len(body), len(hdr)) + hdr + body
        op_pos, uniq_pos = frame.index(b"OOOOOOOOOO"), frame.index(b"UUUUUUUUUUUU")
        frame = frame.replace(b"OOOOOOOOOO", b"         0").replace(b"UUUUUUUUUUUU", b"000000000000")
        out.append(struct.pack("<iii", len(frame), op_pos, uniq_pos) + frame)
    path.write_bytes(b"".join(out))


def admin(addr: str, code: int, fields: dict[str, str]) -> dict[str, str]:
    req = create_request(code, fields)
    RequestSigner(*ADMIN)(req)  # ACL off ignores the signature
    r = invoke_sync(addr, req, 10_000)
    if r.code != 0:
        raise RuntimeError(f"request {code} failed: {r.code} {r.remark}")
    return orjson.loads(r.body)["table"] if r.body else {}


def fast_counters(addr: str) -> tuple[int, int]:
    t = admin(addr, RequestCode.GET_BROKER_RUNTIME_INFO, {})
    return int(t["fastSendTaken"]), int(t.get("fastSendAclChecked", 0))


def measure(
    gen: Path,
    tmpl: Path,
    broker: BrokerProcess,
    seconds: float,
    conns: int,
    inflight: int,
    load_cpus: set[int] | None,
) -> tuple[float, float, float]:
    """Sends/s in the window, and the broker's and the generator's CPU shares over it."""
    host, port = broker.broker_addr.rsplit(":", 1)
    lat = tmpl.with_suffix(".lat")
    with pinned(load_cpus):
        p = subprocess.Popen(
            [str(gen), host, port, str(conns), str(inflight), str(tmpl), str(lat), "0"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
    assert p.stdin is not None and p.stdout is not None
    if p.stdout.readline().strip() != "READY":
        raise RuntimeError("loadgen_c did not connect")
    start = time.monotonic() + 2.0  # warm-up: the first sends vet the topic (Python)
    p.stdin.write(f"GO {start:.6f} {start + seconds:.6f}\n")
    p.stdin.flush()
    time.sleep(max(0.0, start - time.monotonic()))
    share = CpuShare(broker.proc.pid, p.pid)
    result = json.loads(p.stdout.readline())
    broker_share, load_share = share.shares()
    p.wait(30)
    if result["errors"]:
        raise RuntimeError(f"sends refused: {result['error_samples']}")
    return result["ok"] / seconds, broker_share, load_share


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("seconds", nargs="?", type=float, default=8.0)
    ap.add_argument("rounds", nargs="?", type=int, default=3)
    ap.add_argument("conns", nargs="?", type=int, default=4)
    ap.add_argument("inflight", nargs="?", type=int, default=16)
    ap.add_argument("--body-size", type=int, default=1024, help="message body bytes (default 1024)")
    ap.add_argument("--broker-cpus", type=parse_cpus, default=None, help="CPU list for the broker, e.g. 0")
    ap.add_argument("--load-cpus", type=parse_cpus, default=None, help="CPU list for the load, e.g. 1")
    a = ap.parse_args()
    if a.broker_cpus and a.load_cpus and a.broker_cpus & a.load_cpus:
        ap.error("--broker-cpus and --load-cpus overlap")
    seconds, rounds, conns, inflight = a.seconds, a.rounds, a.conns, a.inflight
    results: dict[str, list[tuple[float, float, int, int, float, float]]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        gen = root / "loadgen_c"
        cc = os.environ.get("CC", "cc")
        subprocess.run([cc, "-O2", "-o", str(gen), str(HERE / "loadgen_c.c")], check=True)
        tmpl = root / "frames.bin"
        templates(tmpl, b"x" * a.body_size)
        acl_file = root / "plain_acl.yml"
        acl_file.write_text(RULES, encoding="utf-8")
        inner = json.dumps({"accessKey": ADMIN[0], "secretKey": ADMIN[1]})
        setups = {
            "ACL off": [],
            "ACL on": [
                "aclEnable=true",
                f"aclFilePath={acl_file}",
                f"innerClientAuthenticationCredentials={inner}",
            ],
        }
        for r in range(rounds):
            for i, (name, props) in enumerate(setups.items()):
                with pinned(a.broker_cpus):
                    broker = start_broker(root / f"store{r}-{i}", *props)
                try:
                    topic = {"topic": TOPIC, "readQueueNums": str(QUEUES), "writeQueueNums": str(QUEUES)}
                    topic.update({"perm": "6", "topicFilterType": "SINGLE_TAG", "topicSysFlag": "0"})
                    admin(
                        broker.broker_addr, RequestCode.UPDATE_AND_CREATE_TOPIC, {**topic, "order": "false"}
                    )
                    load = os.getloadavg()[0]
                    before = fast_counters(broker.broker_addr)
                    rate, b_share, l_share = measure(gen, tmpl, broker, seconds, conns, inflight, a.load_cpus)
                    after = fast_counters(broker.broker_addr)
                finally:
                    broker.stop()
                taken, checked = after[0] - before[0], after[1] - before[1]
                results.setdefault(name, []).append((rate, load, taken, checked, b_share, l_share))
    pins = f"broker on CPUs {sorted(a.broker_cpus or [])}, load on {sorted(a.load_cpus or [])}"
    print(f"pinning: {pins if a.broker_cpus or a.load_cpus else 'none'}")
    print(
        f"| setup | sends/s, median of {rounds} ({conns} x {inflight} in flight, {a.body_size} B bodies,"
        f" {seconds:g} s each) "
        "| runs | taken by the fast path / of them ACL-checked there (whole run) | broker / load CPU share "
        "| load average (1 min) |"
    )
    print("| --- | ---: | --- | --- | --- | --- |")
    medians = {}
    for name, runs in results.items():
        rates = [x[0] for x in runs]
        medians[name] = statistics.median(rates)
        each = " / ".join(f"{x:,.0f}" for x in rates)
        fast = " / ".join(f"{x[2]:,} / {x[3]:,}" for x in runs)
        loads = " / ".join(f"{x[1]:.1f}" for x in runs)
        shares = " / ".join(f"{x[4]:.2f} / {x[5]:.2f}" for x in runs)
        print(f"| {name} | {medians[name]:,.0f} | {each} | {fast} | {shares} | {loads} |", flush=True)
    print(f"\nACL on / ACL off (medians): {medians['ACL on'] / medians['ACL off']:.2f}")


if __name__ == "__main__":
    main()
