from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.urls import include, path, re_path
from drf_spectacular.views import SpectacularSwaggerView

from cases.api.views import api_not_found
from core.schema_view import CachedSchemaView
from intake import views as intake_views
from ops import views as ops_views
from web.retries import admin_urls_retried, writes_retried

urlpatterns = [
    # Writes retried after a deadlock, as every page's are (web/retries.py).
    path("admin/", admin_urls_retried(admin.site.urls)),
    *writes_retried([
        path("accounts/login/", auth_views.LoginView.as_view(), name="login"),
        path("accounts/logout/", auth_views.LogoutView.as_view(), name="logout"),
    ], atomic=True),
    # REST API (DRF). Each app mounts its own routes under /api/v1/.
    path("api/v1/", include("cases.api.urls")),
    path("api/v1/", include("runs.api.urls")),
    path("api/v1/", include("conversations.api.urls")),
    path("api/v1/", include("integrations.api.urls")),  # me, events, webhooks
    path("api/schema/", CachedSchemaView.as_view(), name="api_schema"),  # generated once per process
    # Swagger UI's assets come from drf-spectacular-sidecar's static files: no CDN, works offline.
    # (No Redoc page: drf-spectacular's Redoc template loads web fonts from an external host.)
    path("api/docs/", SpectacularSwaggerView.as_view(url_name="api_schema", template_name="ops/swagger_ui.html"),
         name="api_docs"),  # ops/swagger_ui.html: the same page with CSP nonces
    # Operations: Prometheus metrics, operators only. /healthz and /readyz are answered by
    # ops.middleware.HealthProbeMiddleware before host checks and the HTTPS redirect.
    path("metrics", ops_views.metrics, name="metrics"),
    # Inbound e-mail: the provider's webhook, its signature checked by anymail (intake/views.py).
    path("inbound/email/", intake_views.inbound_email, name="inbound_email"),
    # Keep last among the api/ routes: any other address under api/ is a JSON 404.
    re_path(r"^api/", api_not_found),
    path("", include("web.urls")),
]

# Error pages answer JSON under /api/ and Django's HTML elsewhere (core/api.py).
handler400 = "core.api.handler400"
handler403 = "core.api.handler403"
handler404 = "core.api.handler404"
handler500 = "core.api.handler500"
