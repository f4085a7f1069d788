"""Event-loop selection: uvloop when it is installed, the standard asyncio loop otherwise."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

__all__ = ["best_loop_factory", "install_best_loop", "loop_name", "run"]

_T = TypeVar("_T")


def best_loop_factory() -> Callable[[], asyncio.AbstractEventLoop]:
    """``uvloop.new_event_loop`` if uvloop imports, else ``asyncio.new_event_loop``."""
    try:
        import uvloop
    except ImportError:
        return asyncio.new_event_loop
    return uvloop.new_event_loop


def install_best_loop() -> str:
    """Make uvloop the default loop policy when available; returns ``"uvloop"`` or ``"asyncio"``."""
    try:
        import uvloop
    except ImportError:
        return "asyncio"
    asyncio.set_event_loop_policy(uvloop.EventLoopPolicy())
    return "uvloop"


def loop_name(loop: asyncio.AbstractEventLoop | None = None) -> str:
    loop = loop or asyncio.get_running_loop()
    return "uvloop" if type(loop).__module__.startswith("uvloop") else "asyncio"


def run(main: Coroutine[Any, Any, _T], *, debug: bool | None = None) -> _T:
    """``asyncio.run`` on the best available loop."""
    factory = best_loop_factory()
    loop = factory()
    try:
        asyncio.set_event_loop(loop)
        if debug is not None:
            loop.set_debug(debug)
        return loop.run_until_complete(main)
    finally:
        try:
            _cancel_all_tasks(loop)
            loop.run_until_complete(loop.shutdown_asyncgens())
        finally:
            asyncio.set_event_loop(None)
            loop.close()


def _cancel_all_tasks(loop: asyncio.AbstractEventLoop) -> None:
    tasks = [t for t in asyncio.all_tasks(loop) if not t.done()]
    for task in tasks:
        task.cancel()
    if tasks:
        loop.run_until_complete(asyncio.gather(*tasks, return_exceptions=True))
