"""The memory pages, mounted at ``/memory/`` (names are ``memory:<thing>``)."""

from __future__ import annotations

from django.urls import path

from memory import views

app_name = "memory"

urlpatterns = [
    path("", views.scopes, name="scopes"),
    path("scope/<str:scope>/", views.scope_detail, name="scope"),
    path("scope/<str:scope>/recall/", views.scope_recall, name="recall"),
    path("scope/<str:scope>/chain/", views.scope_chain, name="chain"),
    path("scope/<str:scope>/forget/", views.forget, name="forget"),
    path("records/<str:record_id>/", views.record_detail, name="record"),
    path("sessions/", views.session_detail, name="session"),
    path("recalls/<str:retrieval_id>/", views.retrieval_detail, name="retrieval"),
    path("review/", views.review_queue, name="review"),
    path("review/decide/", views.review_decide, name="decide"),
    path("review/bulk/", views.review_bulk, name="bulk"),
    path("review/source/", views.review_source, name="decide_source"),
    path("receipts/verify/", views.receipt_verify, name="receipt_verify"),
    path("receipts/<str:event_id>/", views.receipt, name="receipt"),
    path("receipts/<str:event_id>/download/", views.receipt_download, name="receipt_json"),
]
