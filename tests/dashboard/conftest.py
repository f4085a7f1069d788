"""The dashboard tests' world (one broker for the session) and their screenshots, listed at the end of
pytest's output (CI keeps them)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.brokerproc import BrokerProcess
from tests.dashboard.world import World, running_acl_broker, running_world

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


@pytest.fixture(scope="session")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    yield from running_world(tmp_path_factory.mktemp("dashboard"))


@pytest.fixture(scope="session")
def acl_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    yield from running_acl_broker(tmp_path_factory.mktemp("dashboard-acl"))
