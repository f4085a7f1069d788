"""Child process for the crash test: appends with SYNC_FLUSH and reports acknowledgements.

Prints one line `qoff crc phys` per message after its flush was confirmed, then keeps going
until killed.
"""

from __future__ import annotations

import sys
import zlib

from rmq.store import MessageStore


def main() -> None:
    root, start = sys.argv[1], int(sys.argv[2])
    s = MessageStore(
        {
            "storePathRootDir": root,
            "flushDiskType": "SYNC_FLUSH",
            "mappedFileSizeCommitLog": 256 * 1024,
            "mappedFileSizeConsumeQueue": 20 * 500,
            "maxHashSlotNum": 100,
            "maxIndexNum": 1000,
            # Crash recovery, not retention: how full the host's disk is must not delete files here.
            "diskMaxUsedSpaceRatio": 100,
        }
    )
    print("ready", s.max_offset("C", 0), flush=True)
    i = start
    while True:
        body = (b"%08d-" % i) * (1 + i % 50)
        _, qoff, phys, size, _ = s.put("C", 0, body, b"KEYS\x01k%d" % i)
        s.wait_flushed(phys + size, 10_000)
        sys.stdout.write(f"{qoff} {zlib.crc32(body)} {i}\n")
        sys.stdout.flush()
        i += 1


if __name__ == "__main__":
    main()
