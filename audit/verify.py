"""Walk every hash chain and report the first event that does not match."""

from __future__ import annotations

from dataclasses import dataclass

from audit.models import AuditEvent, AuditStreamHead


@dataclass
class ChainBreak:
    stream: str
    event_id: int | None
    sequence: int
    reason: str


def verify_stream(stream: str) -> ChainBreak | None:
    expected_prev = ""
    expected_sequence = 1
    last = None
    for event in AuditEvent.objects.filter(stream=stream).order_by("sequence").iterator(chunk_size=2000):
        if event.sequence != expected_sequence:
            return ChainBreak(stream, event.pk, event.sequence,
                              f"sequence gap: expected {expected_sequence}, found {event.sequence}")
        if event.prev_hash != expected_prev:
            return ChainBreak(stream, event.pk, event.sequence, "prev_hash does not match the previous event")
        if event.compute_hash() != event.hash:
            return ChainBreak(stream, event.pk, event.sequence, "stored hash does not match the event's content")
        expected_prev = event.hash
        expected_sequence += 1
        last = event
    head = AuditStreamHead.objects.filter(stream=stream).first()
    if head is not None and (head.last_sequence != (last.sequence if last else 0)
                             or head.last_hash != (last.hash if last else "")):
        return ChainBreak(stream, None, head.last_sequence,
                          "stream head does not match the last event (events removed from the end?)")
    return None


def verify_all(streams: list[str] | None = None) -> tuple[int, list[ChainBreak]]:
    if streams is None:
        streams = sorted(set(AuditEvent.objects.values_list("stream", flat=True).distinct())
                         | set(AuditStreamHead.objects.values_list("stream", flat=True)))
    breaks = [b for b in (verify_stream(s) for s in streams) if b is not None]
    return len(streams), breaks
