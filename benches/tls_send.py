"""Send rate of rmq's client with TLS beside plaintext: ``python benches/tls_send.py [seconds] [senders]``.

For each setup a broker is started as its own process (``python -m rmq.broker``, embedded name server) and one
rmq ``Producer`` keeps ``senders`` synchronous sends of a 1 KiB body in flight for ``seconds``; the sends
answered per second are printed as a table. Setups: plaintext served by the network thread (the send fast
path), plaintext served by the asyncio server (``networkThread=false``), and TLS (``tls.server.mode=
enforcing``) on each of the two. Certificates are made at run time (``tests/tls/tlsenv.py``).
"""

from __future__ import annotations

import asyncio
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from rmq.client import ClientConfig, Message, Producer

from tests.brokerproc import start_broker
from tests.tls.tlsenv import make_pki, server_props

TOPIC = "TlsBench"
BODY = b"x" * 1024


async def measure(namesrv: str, tls: bool, ca: str, seconds: float, senders: int) -> float:
    cfg = ClientConfig(
        namesrv_addr=namesrv, instance_name=f"bench-{tls}", tls=tls, tls_ca=ca if tls else None
    )
    producer = Producer("TlsBenchProducer", client_config=cfg)
    await producer.start()
    try:
        await producer.send(Message(TOPIC, BODY))  # route lookup + connection, outside the measurement
        done = 0
        end = time.monotonic() + seconds

        async def sender() -> None:
            nonlocal done
            while time.monotonic() < end:
                await producer.send(Message(TOPIC, BODY))
                done += 1

        start = time.monotonic()
        await asyncio.gather(*(sender() for _ in range(senders)))
        return done / (time.monotonic() - start)
    finally:
        await producer.shutdown()


def main() -> None:
    seconds = float(sys.argv[1]) if len(sys.argv) > 1 else 10.0
    senders = int(sys.argv[2]) if len(sys.argv) > 2 else 16
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        pki = make_pki(root / "pki")
        setups = {
            "plaintext, network thread": ({}, False),
            "plaintext, asyncio server": ({"networkThread": "false"}, False),
            "TLS (enforcing), network thread": (server_props(pki, "enforcing"), True),
            "TLS (enforcing), asyncio server": (
                {**server_props(pki, "enforcing"), "networkThread": "false"},
                True,
            ),
        }
        print(f"| setup | sends/s ({senders} in flight, 1 KiB, {seconds:g} s) |")
        print("| --- | ---: |")
        for i, (name, (props, tls)) in enumerate(setups.items()):
            proc = start_broker(root / f"store{i}", *(f"{k}={v}" for k, v in props.items()))
            try:
                rate = asyncio.run(measure(proc.namesrv_addr, tls, str(pki.ca), seconds, senders))
            finally:
                proc.stop()
            print(f"| {name} | {rate:,.0f} |", flush=True)


if __name__ == "__main__":
    main()
