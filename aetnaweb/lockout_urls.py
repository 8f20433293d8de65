"""The sign-in lockouts page, mounted at ``/access/lockouts/``."""

from __future__ import annotations

from django.urls import path

from aetnaweb import lockout_views

app_name = "lockouts"

urlpatterns = [
    path("", lockout_views.lockout_list, name="list"),
    path("<int:throttle_id>/clear/", lockout_views.lockout_clear, name="clear"),
]
