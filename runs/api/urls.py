"""/api/v1/ routes for runs (with their steps, model calls, tool calls, findings, artifacts) and memory."""

from django.urls import path

from runs.api import views

app_name = "runs_api"

urlpatterns = [
    path("runs/", views.RunListStartApi.as_view(), name="run_list"),
    path("runs/<int:pk>/", views.RunDetailApi.as_view(), name="run_detail"),
    path("runs/<int:pk>/steps/", views.RunStepListApi.as_view(), name="run_steps"),
    path("runs/<int:pk>/steps/<int:sequence>/model-calls/", views.RunStepModelCallListApi.as_view(),
         name="run_step_model_calls"),
    path("runs/<int:pk>/tool-calls/", views.RunToolCallListApi.as_view(), name="run_tool_calls"),
    path("runs/<int:pk>/findings/", views.RunFindingListApi.as_view(), name="run_findings"),
    path("runs/<int:pk>/artifacts/", views.RunArtifactListApi.as_view(), name="run_artifacts"),
    path("runs/<int:pk>/cancel/", views.RunCancelApi.as_view(), name="run_cancel"),
    path("runs/<int:pk>/resume/", views.RunResumeApi.as_view(), name="run_resume"),
    path("runs/<int:pk>/fork/", views.RunForkApi.as_view(), name="run_fork"),
    path("memory/", views.MemoryListApi.as_view(), name="memory_list"),
    path("memory/<int:pk>/", views.MemoryDetailApi.as_view(), name="memory_detail"),
    path("memory/<int:pk>/confirm/", views.MemoryConfirmApi.as_view(), name="memory_confirm"),
    path("memory/<int:pk>/forget/", views.MemoryForgetApi.as_view(), name="memory_forget"),
]
