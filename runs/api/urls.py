"""/api/v1/ routes for runs (with their steps, model calls, tool calls, findings, artifacts) and memory."""

from django.urls import path

import core.api  # noqa: F401  (registers the `id` path converter)
from runs.api import views

app_name = "runs_api"

urlpatterns = [
    path("runs/", views.RunListStartApi.as_view(), name="run_list"),
    path("runs/<id:pk>/", views.RunDetailApi.as_view(), name="run_detail"),
    path("runs/<id:pk>/steps/", views.RunStepListApi.as_view(), name="run_steps"),
    path("runs/<id:pk>/steps/<id:sequence>/model-calls/", views.RunStepModelCallListApi.as_view(),
         name="run_step_model_calls"),
    path("runs/<id:pk>/tool-calls/", views.RunToolCallListApi.as_view(), name="run_tool_calls"),
    path("runs/<id:pk>/findings/", views.RunFindingListApi.as_view(), name="run_findings"),
    path("runs/<id:pk>/artifacts/", views.RunArtifactListApi.as_view(), name="run_artifacts"),
    path("runs/<id:pk>/cancel/", views.RunCancelApi.as_view(), name="run_cancel"),
    path("runs/<id:pk>/resume/", views.RunResumeApi.as_view(), name="run_resume"),
    path("runs/<id:pk>/fork/", views.RunForkApi.as_view(), name="run_fork"),
    path("memory/", views.MemoryListApi.as_view(), name="memory_list"),
    path("memory/<id:pk>/", views.MemoryDetailApi.as_view(), name="memory_detail"),
    path("memory/<id:pk>/confirm/", views.MemoryConfirmApi.as_view(), name="memory_confirm"),
    path("memory/<id:pk>/forget/", views.MemoryForgetApi.as_view(), name="memory_forget"),
]
