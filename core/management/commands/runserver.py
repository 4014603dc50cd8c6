"""`manage.py runserver`: Django's development server as `django.contrib.staticfiles` runs it (static
files served with DEBUG), with Nagle's algorithm off on every connection it accepts.

Django's server writes a response's headers and its body in two writes. On a kept-alive
connection (a browser, `requests.Session`, Schemathesis) the kernel holds the second write back
until the client acknowledges the first, and the client delays that acknowledgement: about 40 ms
per request on Linux. Measured here on the API, one request after another on one connection:
44 ms a request with Django's server, 1.6–2.5 ms with this one (`make run`, the contract test).
This app is listed before `django.contrib.staticfiles` so that its `runserver` is the one found."""

from __future__ import annotations

import socket

from django.contrib.staticfiles.management.commands.runserver import Command as StaticFilesRunserver
from django.core.servers.basehttp import WSGIServer


class NoDelayWSGIServer(WSGIServer):
    """Django's development WSGI server; each accepted connection sends its writes at once."""

    def get_request(self):
        connection, address = super().get_request()
        connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        return connection, address


class Command(StaticFilesRunserver):
    server_cls = NoDelayWSGIServer
