"""Where the broker's and name server's logs go: stderr and a rotating file.

RocketMQ writes ``~/logs/rocketmqlogs/broker.log`` and ``namesrv.log``; rmq writes
``~/logs/rmqlogs/<brokerName>_<brokerId>/broker.log`` (one directory per broker, so brokers on one host
never write into the same file) and ``~/logs/rmqlogs/namesrv.log``, or ``broker.log`` / ``namesrv.log``
right under ``logDir`` when it is set, rotated at a size with a number of old files kept, and everything
also to stderr. Every line names the process it comes from (``[broker-a_0 4711]``: the broker's name and
id, or ``namesrv``, and the pid).
"""

from __future__ import annotations

import logging
import logging.handlers
import os
from pathlib import Path

__all__ = ["DEFAULT_LOG_DIR", "FORMAT", "LEVELS", "configure"]

LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")
FORMAT = "%(asctime)s %(levelname)s [{label} {pid}] %(name)s: %(message)s"
"""The line format; ``{label}`` and ``{pid}`` are filled in by :func:`configure`."""
DEFAULT_LOG_DIR = os.path.join("~", "logs", "rmqlogs")


def configure(
    process: str,
    level: str,
    log_dir: str | None = None,
    max_bytes: int = 128 * 1024 * 1024,
    backups: int = 10,
    label: str | None = None,
) -> Path | None:
    """Log at ``level`` to stderr and to ``<log_dir>/<process>.log`` (rotated at ``max_bytes``,
    ``backups`` old files kept); without ``log_dir``, to ``~/logs/rmqlogs/<label>/<process>.log`` when
    ``label`` (the broker's ``<brokerName>_<brokerId>``) is given, else ``~/logs/rmqlogs/<process>.log``.
    Each line carries ``label`` (default: ``process``) and the pid. Returns the file's path, or None when
    the directory cannot be created or written (then stderr only, with a warning saying why). ``level``
    must be one of :data:`LEVELS` (any case); anything else is a ``ValueError``."""
    name = level.upper()
    if name not in LEVELS:
        raise ValueError(f"log level {level!r} is not one of {', '.join(LEVELS)}")
    root = logging.getLogger()
    for handler in list(root.handlers):
        root.removeHandler(handler)
        handler.close()
    root.setLevel(name)
    # The label goes into the format itself ('%' escaped): no per-record work on the logging path.
    tag = (label or process).replace("%", "%%")
    formatter = logging.Formatter(FORMAT.format(label=tag, pid=os.getpid()))
    stderr = logging.StreamHandler()
    stderr.setFormatter(formatter)
    root.addHandler(stderr)
    if log_dir:
        directory = Path(os.path.expanduser(log_dir))
    else:
        directory = Path(os.path.expanduser(DEFAULT_LOG_DIR))
        if label:
            directory /= label
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
