"""Where the broker's and name server's logs go: stderr and a rotating file.

RocketMQ writes ``~/logs/rocketmqlogs/broker.log`` and ``namesrv.log``; rmq writes
``~/logs/rmqlogs/broker.log`` and ``namesrv.log`` (or under ``logDir``), rotated at a size with a
number of old files kept, and everything also to stderr.
"""

from __future__ import annotations

import logging
import logging.handlers
import os
from pathlib import Path

__all__ = ["DEFAULT_LOG_DIR", "FORMAT", "LEVELS", "configure"]

LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")
FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"
DEFAULT_LOG_DIR = os.path.join("~", "logs", "rmqlogs")


def configure(
    process: str,
    level: str,
    log_dir: str | None = None,
    max_bytes: int = 128 * 1024 * 1024,
    backups: int = 10,
) -> Path | None:
    """Log at ``level`` to stderr and to ``<log_dir>/<process>.log`` (rotated at ``max_bytes``,
    ``backups`` old files kept). Returns the file's path, or None when the directory cannot be
    created or written (then stderr only, with a warning saying why). ``level`` must be one of
    :data:`LEVELS` (any case); anything else is a ``ValueError``."""
    name = level.upper()
    if name not in LEVELS:
        raise ValueError(f"log level {level!r} is not one of {', '.join(LEVELS)}")
    root = logging.getLogger()
    for handler in list(root.handlers):
        root.removeHandler(handler)
        handler.close()
    root.setLevel(name)
    formatter = logging.Formatter(FORMAT)
    stderr = logging.StreamHandler()
    stderr.setFormatter(formatter)
    root.addHandler(stderr)
    directory = Path(os.path.expanduser(log_dir or DEFAULT_LOG_DIR))
    path = directory / f"{process}.log"
    try:
        directory.mkdir(parents=True, exist_ok=True)
        file = logging.handlers.RotatingFileHandler(
            path, maxBytes=max_bytes, backupCount=backups, encoding="utf-8"
        )
    except OSError as e:
        logging.getLogger("rmq").warning("logging to stderr only: cannot write %s: %s", path, e)
        return None
    file.setFormatter(formatter)
    root.addHandler(file)
    return path
