"""A tiny SMTP server on 127.0.0.1 for the email-outcome tests (aiosmtpd is not installed).

    with FakeSmtpServer(mode="drop_after_data") as server:
        ... EMAIL_HOST="127.0.0.1", EMAIL_PORT=server.port ...
        server.messages  # every message whose data was received in full (bytes)

Modes:
- "accept": a well-behaved server (250 after the message);
- "drop_after_data": receives the whole message, keeps it (as a real server that queued it would),
  and closes the connection before its final reply — the case where the client cannot know;
- "reject_recipient": 550 to RCPT TO (the message certainly does not go out).
`mode` may be changed between connections. One thread per connection; stopped on exit."""

from __future__ import annotations

import socket
import threading


class FakeSmtpServer:
    def __init__(self, mode: str = "accept"):
        self.mode = mode
        self.messages: list[bytes] = []
        self.connections = 0
        self._sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._sock.bind(("127.0.0.1", 0))
        self._sock.listen(8)
        self.port = self._sock.getsockname()[1]
        self._stopping = threading.Event()
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self.received = threading.Event()  # set whenever a message's data arrived in full

    def __enter__(self) -> FakeSmtpServer:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stopping.set()
        try:
            socket.create_connection(("127.0.0.1", self.port), timeout=1).close()  # wake accept()
        except OSError:
            pass
        self._sock.close()
        self._thread.join(timeout=5)

    def _serve(self) -> None:
        while not self._stopping.is_set():
            try:
                conn, _ = self._sock.accept()
            except OSError:
                return
            if self._stopping.is_set():
                conn.close()
                return
            self.connections += 1
            threading.Thread(target=self._session, args=(conn,), daemon=True).start()

    def _session(self, conn: socket.socket) -> None:
        conn.settimeout(10)
        reader = conn.makefile("rb")

        def reply(line: str) -> None:
            conn.sendall(line.encode() + b"\r\n")

        try:
            reply("220 fake.smtp ESMTP ready")
            while True:
                line = reader.readline()
                if not line:
                    return
                command = line.decode("ascii", "replace").strip()
                verb = command.split(" ", 1)[0].upper()
                if verb in ("EHLO", "HELO"):
                    reply("250 fake.smtp")
                elif verb == "MAIL":
                    reply("250 OK")
                elif verb == "RCPT":
                    reply("550 no such mailbox" if self.mode == "reject_recipient" else "250 OK")
                elif verb == "DATA":
                    reply("354 end data with <CR><LF>.<CR><LF>")
                    data = b""
                    while not data.endswith(b"\r\n.\r\n"):
                        chunk = reader.readline()
                        if not chunk:
                            return
                        data += chunk
                    self.messages.append(data)
                    self.received.set()
                    if self.mode == "drop_after_data":
                        return  # the message is kept; the final reply never comes
                    reply("250 OK queued")
                elif verb == "RSET" or verb == "NOOP":
                    reply("250 OK")
                elif verb == "QUIT":
                    reply("221 bye")
                    return
                else:
                    reply("502 not implemented")
        except OSError:
            return
        finally:
            try:
                reader.close()
                conn.close()
            except OSError:
                pass
