"""Running the official RocketMQ 5.x Python client for the gRPC endpoint's tests (rmq.proxy).

The client (rocketmq-python-client 5.1.2) is installed by ``scripts/peers`` into its own directory of the
peers cache: its import package is ``rocketmq``, as the 4.x client's of the test extra, so it runs in a child
Python (tests/proxy/client5.py) with that directory on its PYTHONPATH.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

CLIENT5 = Path(__file__).with_name("client5.py")


def client5_site() -> Path:
    """The official 5.x Python client's install directory (scripts/peers installs it on first use)."""
    from tests.peers.apache import peer_libs

    return peer_libs().python5


def run_client5(
    scenario: str, timeout: float = 120, extra_env: dict[str, str] | None = None, **args: Any
) -> dict[str, Any]:
    """Run one scenario of the official 5.x Python client; its JSON result."""
    env = dict(os.environ, PYTHONPATH=str(client5_site()), PYTHONUNBUFFERED="1", **(extra_env or {}))
    env.pop("PYTHONHOME", None)
    r = subprocess.run(
        [sys.executable, "-S", str(CLIENT5), scenario, json.dumps(args)],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env,
    )
    if r.returncode != 0:
        raise AssertionError(f"5.x client {scenario} failed ({r.returncode}):\n{r.stderr[-4000:]}")
    return json.loads(r.stdout.strip().splitlines()[-1])
