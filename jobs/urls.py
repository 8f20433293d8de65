"""A background job's page and its file."""

from __future__ import annotations

from django.urls import path

from jobs import views

app_name = "jobs"

urlpatterns = [
    path("<int:job_id>/", views.detail, name="detail"),
    path("<int:job_id>/download", views.download, name="download"),
]
