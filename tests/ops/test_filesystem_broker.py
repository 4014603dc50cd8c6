"""The filesystem broker of `make run` (config.celery): a message is never visible to a polling
worker before it is whole. kombu's own channel created the file and then wrote it; a worker that
read it in between got b"" and exited on JSONDecodeError."""

from __future__ import annotations

import os

import pytest
from kombu import Connection
from kombu.transport import filesystem as kombu_filesystem

import config.celery


def _connection(tmp_path, transport):
    folders = {"data_folder_in": tmp_path, "data_folder_out": tmp_path, "processed_folder": tmp_path / "done"}
    folders["processed_folder"].mkdir()
    return Connection(transport=transport, transport_options={k: str(v) for k, v in folders.items()}
                      | {"store_processed": False})


def _readable_while_writing(tmp_path, monkeypatch, transport) -> list[list[str]]:
    """The message files a poller could take (`*.celery.msg`), listed while the payload is encoded."""
    seen = []

    def dumps(payload, *args, **kwargs):
        seen.append(sorted(name for name in os.listdir(tmp_path) if name.endswith(".celery.msg")))
        return original(payload, *args, **kwargs)

    original = kombu_filesystem.dumps
    monkeypatch.setattr(kombu_filesystem, "dumps", dumps)
    monkeypatch.setattr(config.celery, "dumps", dumps)
    with _connection(tmp_path, transport) as connection:
        channel = connection.default_channel
        channel._put("celery", {"body": "hello"})
        assert channel._get("celery") == {"body": "hello"}
    return seen


def test_a_message_is_invisible_to_a_poller_until_it_is_whole(tmp_path, monkeypatch):
    seen = _readable_while_writing(tmp_path, monkeypatch, config.celery.QuickStopFilesystemTransport)
    assert seen == [[]]
    assert [name for name in os.listdir(tmp_path) if name != "done"] == []  # taken, nothing left behind


def test_kombu_s_own_channel_showed_the_empty_file(tmp_path, monkeypatch):
    """Why the channel is ours: kombu's leaves the final name on disk, empty, while it writes."""
    seen = _readable_while_writing(tmp_path, monkeypatch, kombu_filesystem.Transport)
    assert len(seen) == 1 and len(seen[0]) == 1


def test_a_folder_that_cannot_be_written_is_a_channel_error(tmp_path):
    with _connection(tmp_path, config.celery.QuickStopFilesystemTransport) as connection:
        channel = connection.default_channel
        channel.data_folder_out = str(tmp_path / "missing")
        with pytest.raises(config.celery.ChannelError, match="Cannot add file"):
            channel._put("celery", {"body": "hello"})
        assert os.listdir(tmp_path) == ["done"]
