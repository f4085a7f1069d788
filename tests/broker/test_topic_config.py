"""TopicConfigManager: changes reach the hook at once and are written to topics.json coalesced."""

from __future__ import annotations

import os

from rmq.broker.topic_config import TopicConfigManager
from rmq.common.route import TopicConfig


def manager(config_dir: str) -> TopicConfigManager:
    return TopicConfigManager(
        config_dir, cluster_name="C", broker_name="b", auto_create_topic=True, default_queue_nums=4
    )


async def test_changes_are_announced_at_once_and_written_once(tmp_path):
    topics = manager(str(tmp_path))
    topics.persist()
    written = os.stat(topics.path).st_mtime_ns
    seen: list[str | None] = []
    topics.on_change = seen.append
    for i in range(1000):
        topics.create_in_send(f"T{i}", "TBW102", 4)
    topics.update(TopicConfig("T0", 2, 2, 4))
    topics.delete("T1")
    topics.broker_config_changed()
    assert seen == [f"T{i}" for i in range(1000)] + ["T0", "T1", None]
    # Nothing was written per change ...
    assert os.stat(topics.path).st_mtime_ns == written
    assert topics.data_version.counter == 1003
    # ... the next write covers them all.
    await topics.persist_if_dirty()
    again = manager(str(tmp_path))
    again.load()
    assert again.table == topics.table
    assert again.data_version == topics.data_version
    assert again.table["T0"] == TopicConfig("T0", 2, 2, 4)
    assert "T1" not in again.table
    written = os.stat(topics.path).st_mtime_ns
    await topics.persist_if_dirty()  # nothing changed since: no write
    assert os.stat(topics.path).st_mtime_ns == written


async def test_a_failed_write_is_retried(tmp_path):
    blocker = tmp_path / "config"
    blocker.write_text("a file where the config directory should be")
    topics = manager(str(blocker))
    topics.create_in_send("T", "TBW102", 4)
    await topics.persist_if_dirty()  # logged, kept dirty
    blocker.unlink()
    await topics.persist_if_dirty()
    again = manager(str(blocker))
    again.load()
    assert "T" in again.table


def test_changes_survive_a_crash_before_the_table_is_written(tmp_path):
    topics = manager(str(tmp_path))
    topics.load()
    topics.persist()
    topics.create_in_send("Kept", "TBW102", 4)
    topics.update(TopicConfig("Changed", 2, 2, 4))
    topics.create_in_back("Gone", 1)
    topics.delete("Gone")
    version = topics.data_version
    # A crash now: topics.json is the old one, the journal holds the changes.
    assert "Kept" not in manager_loaded_from_table_only(tmp_path)
    with open(topics._journal._files()[-1][1], "ab") as f:
        f.write(b'{"topic":"Torn","con')  # a write cut short by the crash
    again = manager(str(tmp_path))
    again.load()
    assert again.table["Kept"] == topics.table["Kept"]
    assert again.table["Changed"] == TopicConfig("Changed", 2, 2, 4)
    assert "Gone" not in again.table and "Torn" not in again.table
    assert again.data_version == version
    # The next write covers the journal, which is then dropped.
    again.persist()
    assert again._journal._files() == []
    third = manager(str(tmp_path))
    third.load()
    assert third.table == again.table


def manager_loaded_from_table_only(tmp_path) -> dict[str, TopicConfig]:
    from rmq.broker.persist import load_json
    from rmq.common.route import TopicConfigSerializeWrapper

    data = load_json(str(tmp_path / "topics.json"))
    return TopicConfigSerializeWrapper.from_dict(data).topic_config_table
