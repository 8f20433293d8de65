"""The guarded-actions pages, mounted at ``/actions/``."""

from __future__ import annotations

from django.urls import path

from actions import views

app_name = "actions"

urlpatterns = [
    path("", views.index, name="index"),
    path("attention/", views.attention, name="attention"),
    path("history/", views.history, name="history"),
    path("<str:transaction_id>/", views.detail, name="detail"),
    path("<str:transaction_id>/approve/", views.approve, name="approve"),
    path("<str:transaction_id>/deny/", views.deny, name="deny"),
    path("<str:transaction_id>/abort/", views.abort, name="abort"),
    path("<str:transaction_id>/commit/", views.commit, name="commit"),
    path("<str:transaction_id>/recover/", views.recover, name="recover"),
    path("<str:transaction_id>/resolve/", views.resolve, name="resolve"),
    path("<str:transaction_id>/purge/", views.purge, name="purge"),
    path("<str:transaction_id>/verify/", views.verify, name="verify"),
    path("<str:transaction_id>/receipt.json", views.receipt_json, name="receipt"),
]
