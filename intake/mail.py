"""E-mail intake, the parts that only read a message: which organisation it is addressed to,
which case it quotes, its replay key, its text. Pure functions over an anymail
`AnymailInboundMessage`; nothing here touches the database."""

from __future__ import annotations

import hashlib
import re
from html.parser import HTMLParser

# A case reference as the case pages and notices show it, e.g. [CASE-2026-000123] or CASE-2026-000123.
CASE_REFERENCE = re.compile(r"\bCASE-\d{4}-\d{6}\b")
MESSAGE_KEY_LENGTH = 300


def address_of(address) -> str:
    """The bare address of an anymail EmailAddress (or of the first of several), lower-cased."""
    if isinstance(address, list):
        address = address[0] if address else None
    return (getattr(address, "addr_spec", "") or "").strip().lower()


def recipients(message) -> list[str]:
    """Every address the message was delivered to: the envelope recipient first, then To and Cc."""
    found = []
    envelope = (getattr(message, "envelope_recipient", None) or "").strip().lower()
    if envelope:
        found.extend(part.strip() for part in envelope.split(","))
    found.extend(address_of(address) for address in [*message.to, *message.cc])
    return [address for address in found if address]


def tenant_slug(message, *, domain: str) -> str:
    """The organisation a message is for: the local part of the first recipient at `domain`
    (`acme@inbound.example` is for the organisation whose slug is `acme`); "" when none is."""
    suffix = "@" + domain.lower()
    for address in recipients(message):
        if address.endswith(suffix):
            return address[: -len(suffix)]
    return ""


def message_key(message) -> str:
    """What makes two deliveries the same message: its Message-ID, or, when it has none, the
    sha256 of what it says — its From, To, Cc, Date and Subject, its text and HTML, and each
    attachment's name and bytes. (Not of the message as bytes: a message rebuilt from a provider's
    parsed fields gets new MIME boundaries each time.)"""
    message_id = (message.get("Message-ID") or "").strip()
    if message_id:
        return message_id[:MESSAGE_KEY_LENGTH]
    digest = hashlib.sha256()
    for name in ("From", "To", "Cc", "Date", "Subject"):
        digest.update(f"{name}:{message.get(name) or ''}\n".encode("utf-8", "replace"))
    for body in (message.text or "", message.html or ""):
        digest.update(hashlib.sha256(body.encode("utf-8", "replace")).digest())
    for part in message.attachments:
        digest.update((part.get_filename() or "").encode("utf-8", "replace"))
        digest.update(hashlib.sha256(part.get_content_bytes() or b"").digest())
    return "sha256:" + digest.hexdigest()


def quoted_reference(message) -> str:
    """The first case reference in the subject, else in the text; "" when there is none."""
    for text in (message.subject or "", body_text(message)):
        found = CASE_REFERENCE.search(text)
        if found:
            return found.group(0)
    return ""


class _TextOfHtml(HTMLParser):
    _BREAKS = frozenset({"br", "p", "div", "li", "tr", "h1", "h2", "h3", "h4", "h5", "h6"})
    _SKIPPED = frozenset({"script", "style", "head"})

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.parts: list[str] = []
        self._skipping = 0

    def handle_starttag(self, tag, attrs):
        if tag in self._SKIPPED:
            self._skipping += 1
        elif tag in self._BREAKS:
            self.parts.append("\n")

    def handle_endtag(self, tag):
        if tag in self._SKIPPED and self._skipping:
            self._skipping -= 1

    def handle_data(self, data):
        if not self._skipping:
            self.parts.append(data)


def html_to_text(html: str) -> str:
    parser = _TextOfHtml()
    parser.feed(html)
    parser.close()
    lines = (" ".join(line.split()) for line in "".join(parser.parts).splitlines())
    return "\n".join(line for line in lines if line).strip()


def body_text(message) -> str:
    """The message's text: its text part, or its HTML part turned into text when it has none."""
    if message.text and message.text.strip():
        return message.text.strip()
    if message.html:
        return html_to_text(message.html)
    return ""
