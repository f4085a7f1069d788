"""``examples/*_quickstart.py`` run against a broker, and the README's "Python client" section shows them.

Each example runs as its own process (``RMQ_NAMESRV`` pointing at the test broker), twice: the second run
shows that a group which already consumed resumes from its committed offsets and still gets exactly the
three new messages. The README's code blocks must equal the examples (minus their docstrings).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.brokerproc import BrokerProcess, start_broker

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = [ROOT / "examples" / "async_quickstart.py", ROOT / "examples" / "sync_quickstart.py"]


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    proc = start_broker(tmp_path_factory.mktemp("examples-store"))
    yield proc
    proc.stop()


def example_code(path: Path) -> str:
    """The example without its module docstring."""
    text = path.read_text(encoding="utf-8")
    assert text.startswith('"""'), path
    return text[text.index('"""', 3) + 3 :].strip("\n") + "\n"


def readme_blocks() -> list[str]:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    start = readme.index("\n## Python client\n")
    end = readme.find("\n## ", start + 1)
    section = readme[start : end if end >= 0 else len(readme)]
    return re.findall(r"^```python\n(.*?)^```$", section, re.S | re.M)


def test_readme_shows_the_examples() -> None:
    assert readme_blocks() == [example_code(p) for p in EXAMPLES]


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.stem)
def test_example_runs(broker: BrokerProcess, path: Path) -> None:
    env = dict(os.environ, RMQ_NAMESRV=broker.namesrv_addr, PYTHONUNBUFFERED="1")
    for attempt in (1, 2):
        proc = subprocess.run(
            [sys.executable, str(path)], cwd=ROOT, env=env, capture_output=True, text=True, timeout=90
        )
        detail = f"run {attempt} of {path.name}: rc={proc.returncode}\n{proc.stdout}\n{proc.stderr[-3000:]}"
        assert proc.returncode == 0, detail
        lines = proc.stdout.splitlines()
        assert lines[0] == "sent 3", detail
        assert sorted(lines[1:]) == [f"received hello {i} TagA order-{i}" for i in range(3)], detail
