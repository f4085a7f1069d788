"""Fixtures for the gRPC endpoint (rmq.proxy) with the official RocketMQ 5.x Python client.

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

import pytest

CLIENT5 = Path(__file__).with_name("client5.py")


def client5_site() -> Path:
    cache = Path(os.environ.get("RMQ_PEERS_CACHE", Path.home() / ".cache" / "rmq-peers"))
    tag = f"cp{sys.version_info[0]}{sys.version_info[1]}"
    site = cache / f"rocketmq-python-client-5.1.2-{tag}" / "site"
    if not (site / "rocketmq" / "v5").is_dir():
        pytest.fail(
            f"the RocketMQ 5.x Python client is not in {site}: run scripts/peers (PYTHON={sys.executable})"
        )
    return site


def run_client5(scenario: str, timeout: float = 120, **args: Any) -> dict[str, Any]:
    """Run one scenario of the official 5.x Python client; its JSON result."""
    env = dict(os.environ, PYTHONPATH=str(client5_site()), PYTHONUNBUFFERED="1")
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
