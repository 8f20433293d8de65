"""The webhook pages, mounted at ``/webhooks/``."""

from __future__ import annotations

from django.urls import path

from webhooks import views

app_name = "webhooks"

urlpatterns = [
    path("", views.endpoint_list, name="list"),
    path("<str:endpoint_id>/", views.endpoint_detail, name="detail"),
    path("<str:endpoint_id>/test/", views.endpoint_test, name="test"),
    path("<str:endpoint_id>/rotate/", views.endpoint_rotate, name="rotate"),
    path("<str:endpoint_id>/delete/", views.endpoint_delete, name="delete"),
    path("deliveries/<str:delivery_id>/retry/", views.delivery_retry, name="retry"),
]
