"""Send rate of rmq's client with TLS beside plaintext:
``python benches/tls_send.py [seconds] [senders] [rounds]``.

For each setup a broker is started as its own process (``python -m rmq.broker``, embedded name server) and one
rmq ``Producer`` keeps ``senders`` synchronous sends of a 1 KiB body in flight for ``seconds``; the sends
answered per second are printed as a table. Setups: plaintext served by the network thread (the send fast
path), plaintext served by the asyncio server (``networkThread=false``), and TLS (``tls.server.mode=
enforcing``) on each of the two. Certificates are made at run time (``tests/tls/tlsenv.py``).
"""

from __future__ import annotations

import asyncio
import os
import statistics
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


async def measure(namesrv: str, tls: bool, ca: str, seconds: float, senders: int) -> tuple[float, float]:
    """Sends answered per second, and the share of one core this process (the load generator) used."""
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

        start, cpu = time.monotonic(), time.process_time()
        await asyncio.gather(*(sender() for _ in range(senders)))
        wall = time.monotonic() - start
        return done / wall, (time.process_time() - cpu) / wall
    finally:
        await producer.shutdown()


def main() -> None:
    seconds = float(sys.argv[1]) if len(sys.argv) > 1 else 10.0
    senders = int(sys.argv[2]) if len(sys.argv) > 2 else 16
    rounds = int(sys.argv[3]) if len(sys.argv) > 3 else 3
    results: dict[str, list[tuple[float, float, float]]] = {}
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
        # Rounds alternate the setups, so a change in the machine's other load touches all of them.
        for r in range(rounds):
            for i, (name, (props, tls)) in enumerate(setups.items()):
                proc = start_broker(root / f"store{r}-{i}", *(f"{k}={v}" for k, v in props.items()))
                try:
                    rate, gen = asyncio.run(measure(proc.namesrv_addr, tls, str(pki.ca), seconds, senders))
                finally:
                    proc.stop()
                results.setdefault(name, []).append((rate, gen, os.getloadavg()[0]))
    print(
        f"| setup | sends/s, median of {rounds} ({senders} in flight, 1 KiB, {seconds:g} s each) | runs "
        "| generator CPU (share of a core) | load average (1 min) |"
    )
    print("| --- | ---: | --- | --- | --- |")
    for name, runs in results.items():
        rates = [r for r, _, _ in runs]
        each = " / ".join(f"{r:,.0f}" for r in rates)
        gens = " / ".join(f"{g:.0%}" for _, g, _ in runs)
        loads = " / ".join(f"{la:.1f}" for _, _, la in runs)
        print(f"| {name} | {statistics.median(rates):,.0f} | {each} | {gens} | {loads} |", flush=True)


if __name__ == "__main__":
    main()
