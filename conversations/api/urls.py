"""/api/v1/ routes for threads and messages."""

from django.urls import path

from conversations.api import views

app_name = "conversations_api"

urlpatterns = [
    path("threads/", views.ThreadListCreateApi.as_view(), name="thread_list"),
    path("threads/<int:pk>/", views.ThreadDetailApi.as_view(), name="thread_detail"),
    path("threads/<int:pk>/messages/", views.ThreadMessageListPostApi.as_view(), name="thread_messages"),
    path("threads/<int:pk>/compact/", views.ThreadCompactApi.as_view(), name="thread_compact"),
    path("messages/<int:pk>/redact/", views.MessageRedactApi.as_view(), name="message_redact"),
]
