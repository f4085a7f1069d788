"""The dashboard browser tests' screenshots, listed at the end of pytest's output (CI keeps them)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

SAVED = pytest.StashKey[list[Path]]()


@pytest.fixture(scope="session")
def saved_screenshots(request: pytest.FixtureRequest) -> list[Path]:
    return request.config.stash.setdefault(SAVED, [])


def pytest_terminal_summary(terminalreporter: Any, config: pytest.Config) -> None:
    saved = config.stash.get(SAVED, [])
    if saved:
        terminalreporter.section("dashboard screenshots")
        for path in saved:
            terminalreporter.write_line(str(path))
