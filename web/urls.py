from django.urls import path
from django.views.generic import RedirectView

app_name = "web"

urlpatterns = [
    path("", RedirectView.as_view(url="/admin/"), name="case_list"),
]
