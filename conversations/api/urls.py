"""/api/v1/ routes for threads and messages."""

from django.urls import path

import core.api  # noqa: F401  (registers the `id` path converter)
from conversations.api import views

app_name = "conversations_api"

urlpatterns = [
    path("threads/", views.ThreadListCreateApi.as_view(), name="thread_list"),
    path("threads/<id:pk>/", views.ThreadDetailApi.as_view(), name="thread_detail"),
    path("threads/<id:pk>/messages/", views.ThreadMessageListPostApi.as_view(), name="thread_messages"),
    path("threads/<id:pk>/compact/", views.ThreadCompactApi.as_view(), name="thread_compact"),
    path("messages/<id:pk>/redact/", views.MessageRedactApi.as_view(), name="message_redact"),
]
