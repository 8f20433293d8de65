"""The memory pages, mounted at ``/memory/`` (names are ``memory:<thing>``)."""

from __future__ import annotations

from django.urls import path

from memory import erasure_views, subject_export_views, views

app_name = "memory"

urlpatterns = [
    path("", views.scopes, name="scopes"),
    path("scope/<str:scope>/", views.scope_detail, name="scope"),
    path("scope/<str:scope>/recall/", views.scope_recall, name="recall"),
    path("scope/<str:scope>/chain/", views.scope_chain, name="chain"),
    path("scope/<str:scope>/forget/", views.forget, name="forget"),
    path("scope/<str:scope>/erase/", erasure_views.erase_subject, name="erase_subject"),
    path("scope/<str:scope>/export/", subject_export_views.export_subject, name="export_subject"),
    path("scope/<str:scope>/legal-hold/", erasure_views.legal_hold, name="legal_hold"),
    path("erasures/<int:job_id>/", erasure_views.erasure, name="erasure"),
    path(
        "erasures/<int:job_id>/certificate/",
        erasure_views.certificate_download,
        name="erasure_certificate",
    ),
    path("subject-exports/<int:job_id>/", subject_export_views.progress, name="subject_export"),
    path(
        "subject-exports/<int:job_id>/download/",
        subject_export_views.download,
        name="subject_export_download",
    ),
    path("records/<str:record_id>/", views.record_detail, name="record"),
    path("records/<str:record_id>/history/", views.record_history, name="record_history"),
    path("sessions/", views.session_detail, name="session"),
    path("recalls/<str:retrieval_id>/", views.retrieval_detail, name="retrieval"),
    path("review/", views.review_queue, name="review"),
    path("review/decide/", views.review_decide, name="decide"),
    path("review/bulk/", views.review_bulk, name="bulk"),
    path("review/source/", views.review_source, name="decide_source"),
    path("receipts/verify/", views.receipt_verify, name="receipt_verify"),
    path("receipts/bundle/<str:event_id>/", views.forget_bundle, name="forget_bundle"),
    path(
        "receipts/bundle/<str:event_id>/download/",
        views.forget_bundle_download,
        name="forget_bundle_json",
    ),
    path("receipts/<str:event_id>/", views.receipt, name="receipt"),
    path("receipts/<str:event_id>/download/", views.receipt_download, name="receipt_json"),
]
