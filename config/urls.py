from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.urls import include, path
from drf_spectacular.views import SpectacularAPIView, SpectacularRedocView, SpectacularSwaggerView

urlpatterns = [
    path("admin/", admin.site.urls),
    path("accounts/login/", auth_views.LoginView.as_view(), name="login"),
    path("accounts/logout/", auth_views.LogoutView.as_view(), name="logout"),
    # REST API (DRF). Each app mounts its own routes under /api/v1/.
    path("api/v1/", include("cases.api.urls")),
    path("api/schema/", SpectacularAPIView.as_view(), name="api_schema"),
    # Swagger UI and Redoc assets come from drf-spectacular-sidecar's static files (no CDN).
    path("api/docs/", SpectacularSwaggerView.as_view(url_name="api_schema"), name="api_docs"),
    path("api/redoc/", SpectacularRedocView.as_view(url_name="api_schema"), name="api_redoc"),
    path("", include("web.urls")),
]
