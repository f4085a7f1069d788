"""SIGKILL a SYNC_FLUSH writer at random points; every acknowledged message must survive."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import threading
import time
import zlib

from rmq.store import MessageStore, decode_records

CHILD = os.path.join(os.path.dirname(__file__), "crash_child.py")


def run_and_kill(root: str, start: int, rng: random.Random) -> dict[int, tuple[int, int]]:
    env = dict(os.environ, PYTHONPATH=os.getcwd())
    p = subprocess.Popen(
        [sys.executable, CHILD, root, str(start)],
        stdout=subprocess.PIPE,
        env=env,
        text=True,
    )
    assert p.stdout is not None
    first = p.stdout.readline()
    assert first.startswith("ready"), first
    lines: list[str] = []
    reader = threading.Thread(target=lambda: lines.extend(p.stdout), daemon=True)
    reader.start()
    time.sleep(rng.uniform(0.02, 0.4))
    p.send_signal(signal.SIGKILL)
    p.wait()
    reader.join(10)
    acked: dict[int, tuple[int, int]] = {}
    for line in lines:
        parts = line.split()
        # A line cut by the kill is not an acknowledgement the parent could have seen.
        if len(parts) == 3 and line.endswith("\n"):
            acked[int(parts[0])] = (int(parts[1]), int(parts[2]))
    return acked


def test_sigkill_during_sync_flush_loses_nothing_acknowledged(tmp_path):
    rng = random.Random(20261121)
    root = str(tmp_path / "store")
    all_acked: dict[int, tuple[int, int]] = {}
    next_i = 0
    for cycle in range(20):
        acked = run_and_kill(root, next_i, rng)
        all_acked.update(acked)
        if acked:
            next_i = max(i for _, i in acked.values()) + 1000
        s = MessageStore(
            {
                "storePathRootDir": root,
                "mappedFileSizeCommitLog": 256 * 1024,
                "mappedFileSizeConsumeQueue": 20 * 500,
                "maxHashSlotNum": 100,
                "maxIndexNum": 1000,
                # Crash recovery, not retention: how full the host's disk is must not delete files here.
                "diskMaxUsedSpaceRatio": 100,
            }
        )
        try:
            assert s.recovery_report()["last_shutdown"] == "crashed"
            n = s.max_offset("C", 0)
            assert n >= len(all_acked), f"cycle {cycle}: {n} messages, {len(all_acked)} acked"
            # Offsets have no holes: every logical offset reads back, intact (CRC checked).
            off = 0
            while off < n:
                status, nxt, _, _, buf, cnt = s.get_message("C", 0, off, 32)
                assert status == "FOUND", (cycle, off, status)
                recs = decode_records(buf, check_crc=True)
                assert [r[2] for r in recs] == list(range(off, off + cnt))
                for r in recs:
                    if r[2] in all_acked:
                        crc, i = all_acked[r[2]]
                        assert zlib.crc32(r[12]) == crc, f"cycle {cycle}: offset {r[2]} damaged"
                        assert r[12].startswith(b"%08d-" % i)
                off = nxt
            assert off == n
        finally:
            s.shutdown()
    assert len(all_acked) > 100
