"""The audit pages: explorer, verification runs, checkpoints and evidence upload."""

from __future__ import annotations

from django.urls import path

from audit import views

app_name = "audit"

urlpatterns = [
    path("", views.explorer, name="explorer"),
    path("events/<str:event_id>/", views.event_detail, name="event"),
    path("export.jsonl", views.export, name="export"),
    path("exports/", views.exports, name="exports"),
    path("verify/", views.verify_start, name="verify"),
    path("runs/<int:run_id>/", views.run_detail, name="run"),
    path("checkpoints/", views.checkpoints, name="checkpoints"),
    path("checkpoints/create/", views.checkpoint_create, name="checkpoint_create"),
    path("checkpoints/verify/", views.evidence_verify, name="evidence_verify"),
    path(
        "checkpoints/consistency.json",
        views.checkpoint_consistency,
        name="checkpoint_consistency",
    ),
    path("checkpoints/all.jsonl", views.checkpoint_download_all, name="checkpoint_download_all"),
    path(
        "checkpoints/<int:checkpoint_id>.jsonl",
        views.checkpoint_download,
        name="checkpoint_download",
    ),
]
