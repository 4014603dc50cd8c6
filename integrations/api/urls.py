"""/api/v1/ routes of integrations: me, the event feed, webhooks."""

from django.urls import path

import core.api  # noqa: F401  (registers the `id` path converter)
from integrations.api import catalogue_views, views

app_name = "integrations_api"

urlpatterns = [
    path("me/", views.MeApi.as_view(), name="me"),
    path("events/", views.EventFeedApi.as_view(), name="event_feed"),
    path("event-types/", catalogue_views.EventTypeListApi.as_view(), name="event_types"),
    path("webhooks/", views.WebhookEndpointListCreateApi.as_view(), name="webhook_list"),
    path("webhooks/<id:pk>/", views.WebhookEndpointDetailApi.as_view(), name="webhook_detail"),
    path("webhooks/<id:pk>/deliveries/", views.WebhookDeliveryListApi.as_view(), name="webhook_deliveries"),
    path("webhooks/<id:pk>/redeliver/", views.WebhookRedeliverSinceApi.as_view(), name="webhook_redeliver_since"),
    path("webhooks/<id:pk>/rotate-secret/", views.WebhookSecretRotateApi.as_view(), name="webhook_rotate_secret"),
    path("webhooks/<id:pk>/ping/", views.WebhookPingApi.as_view(), name="webhook_ping"),
    path("webhook-deliveries/<id:pk>/redeliver/", views.WebhookRedeliverApi.as_view(), name="webhook_redeliver"),
]
