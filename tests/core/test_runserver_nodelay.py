"""`manage.py runserver` (make run, the contract test) is ours: Django's development server with
Nagle's algorithm off on each connection, so a kept-alive client does not wait ~40 ms a response
for the delayed acknowledgement of its headers (core/management/commands/runserver.py)."""

from __future__ import annotations

import socket

from django.contrib.staticfiles.management.commands.runserver import Command as StaticFilesRunserver
from django.core.management import get_commands, load_command_class
from django.core.servers.basehttp import WSGIRequestHandler

from core.management.commands.runserver import NoDelayWSGIServer


def test_runserver_is_core_s_and_still_serves_static_files():
    assert get_commands()["runserver"] == "core"
    command = load_command_class("core", "runserver")
    assert isinstance(command, StaticFilesRunserver) and command.server_cls is NoDelayWSGIServer


def test_each_accepted_connection_has_nagle_off():
    server = NoDelayWSGIServer(("127.0.0.1", 0), WSGIRequestHandler)
    client = socket.create_connection(server.server_address[:2])
    try:
        connection, _ = server.get_request()
        try:
            assert connection.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY) == 1
        finally:
            connection.close()
    finally:
        client.close()
        server.server_close()
