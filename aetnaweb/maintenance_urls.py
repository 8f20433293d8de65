"""The Maintenance page, mounted at ``/maintenance/``."""

from __future__ import annotations

from django.urls import path

from aetnaweb import maintenance_views

app_name = "maintenance"

urlpatterns = [
    path("", maintenance_views.index, name="index"),
    path("retention/", maintenance_views.retention_start, name="retention"),
    path("reindex/", maintenance_views.reindex_start, name="reindex"),
    path(
        "memory-retention/",
        maintenance_views.memory_retention_policy,
        name="memory_retention",
    ),
]
