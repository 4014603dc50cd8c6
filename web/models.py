"""What the browser UI keeps: saved views of the case queue (named filter sets, per person) and
how far each person has read their notifications."""

from django.conf import settings
from django.db import models


class SavedView(models.Model):
    """A named set of queue filters, kept server-side for one person (the query string the queue
    understands, without its page cursor). Written only through web.services."""

    tenant = models.ForeignKey("accounts.Tenant", on_delete=models.CASCADE, related_name="+")
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="saved_views")
    name = models.CharField(max_length=80)
    query = models.CharField(max_length=1000, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["name", "id"]
        constraints = [models.UniqueConstraint(fields=["user", "name"], name="saved_view_name_unique_per_user")]

    def __str__(self) -> str:
        return f"{self.name} ({self.user_id})"


class NotificationsRead(models.Model):
    """Until when one person has read their notifications (web.notifications lists what happened to
    their runs, proposals and notices; what came after `read_until` is unread). Written only by
    web.services.notifications_mark_read."""

    user = models.OneToOneField(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+")
    read_until = models.DateTimeField()

    def __str__(self) -> str:
        return f"notifications of {self.user_id} read until {self.read_until:%Y-%m-%d %H:%M}"
