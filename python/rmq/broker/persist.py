"""Config files under `<storePathRootDir>/config/`, written the way RocketMQ's ConfigManager does:
write `<file>.tmp`, keep the previous file as `<file>.bak`, rename the tmp into place. Loading
falls back to the `.bak` when the main file is missing, empty or unparsable."""

from __future__ import annotations

import logging
import os
import shutil
from typing import Any

from rmq.common import fastjson

__all__ = ["load_json", "persist_json"]

log = logging.getLogger(__name__)


def load_json(path: str) -> Any | None:
    for candidate in (path, path + ".bak"):
        try:
            with open(candidate, "rb") as f:
                data = f.read()
        except FileNotFoundError:
            continue
        if not data.strip():
            continue
        try:
            return fastjson.loads(data)
        except ValueError as e:
            log.warning("cannot parse %s (%s); trying its backup", candidate, e)
    return None


def persist_json(path: str, obj: Any) -> None:
    os.makedirs(os.path.dirname(path), exist_ok=True)
    data = fastjson.dumps(obj)
    tmp = path + ".tmp"
    with open(tmp, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
    if os.path.exists(path):
        shutil.copyfile(path, path + ".bak")
    os.replace(tmp, path)
