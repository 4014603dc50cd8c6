"""{% load outbox_status %}{% worker_status %}: a one-line warning when no Celery worker is alive
(renders templates/web/_worker_status.html; nothing when a worker is alive)."""

from django import template

from outbox.selectors import worker_status as read

register = template.Library()


@register.inclusion_tag("web/_worker_status.html")
def worker_status():
    return {"worker_status": read()}
