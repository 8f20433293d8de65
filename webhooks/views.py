"""The webhook pages: endpoints you administer, their deliveries, test and retry.

Only operators holding the admin role on an endpoint's scope (or above it)
see or change it; anything else answers 404 (services and selectors check).
"""

from __future__ import annotations

from datetime import datetime

from django.contrib import messages
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_http_methods, require_POST

from aetnaweb import access
from aetnaweb.dashboard import dashboard_view, principal_for
from webhooks import selectors, services
from webhooks.events import SUBSCRIBABLE
from webhooks.forms import EndpointCreateForm, EndpointEditForm
from webhooks.models import WebhookDelivery, WebhookEndpoint


def _list_page(
    request: HttpRequest, form: EndpointCreateForm, *, status: int = 200
) -> HttpResponse:
    principal = principal_for(request)
    endpoints = list(selectors.endpoints_administered(principal)[:200])
    counts = selectors.status_counts([endpoint.id for endpoint in endpoints])
    for endpoint in endpoints:
        endpoint.counts = counts.get(endpoint.id, {})  # type: ignore[attr-defined]
    return render(
        request,
        "webhooks/list.html",
        {
            "form": form,
            "endpoints": endpoints,
            "administered": access.administered_scopes(principal),
            "event_help": SUBSCRIBABLE,
        },
        status=status,
    )


def _created(
    request: HttpRequest, issued: services.IssuedEndpoint, *, rotated: bool
) -> HttpResponse:
    # The secret is rendered in this response only: never stored, never redirected.
    return render(
        request,
        "webhooks/created.html",
        {"endpoint": issued.endpoint, "secret": issued.secret, "rotated": rotated},
        status=200 if rotated else 201,
    )


@never_cache
@require_http_methods(["GET", "POST"])
@dashboard_view
def endpoint_list(request: HttpRequest) -> HttpResponse:
    """GET: the endpoints the operator administers and the create form. POST: create one."""
    if request.method == "GET":
        return _list_page(request, EndpointCreateForm())
    form = EndpointCreateForm(request.POST)
    if not form.is_valid():
        return _list_page(request, form, status=400)
    try:
        issued = services.create_endpoint(
            principal=principal_for(request),
            url=form.cleaned_data["url"],
            scope=form.cleaned_data["scope"],
            events=form.cleaned_data["events"],
            description=form.cleaned_data["description"],
        )
    except access.AccessDenied:
        form.add_error(
            "scope",
            f"You do not hold the admin role on {form.cleaned_data['scope']} or on a scope above it.",
        )
        return _list_page(request, form, status=400)
    except services.WebhookError as exc:
        form.add_error(exc.field if exc.field in form.fields else None, str(exc))
        return _list_page(request, form, status=400)
    return _created(request, issued, rotated=False)


def _endpoint_or_404(request: HttpRequest, endpoint_id: str) -> WebhookEndpoint:
    endpoint = selectors.endpoint_for(principal_for(request), endpoint_id)
    if endpoint is None:
        raise Http404("no such webhook endpoint")
    return endpoint


def _before(raw: str | None) -> tuple[str, str] | None:
    created, _, delivery_id = (raw or "").partition("|")
    try:
        datetime.fromisoformat(created)
    except ValueError:
        return None
    return (created, delivery_id) if delivery_id else None


@never_cache
@require_http_methods(["GET", "POST"])
@dashboard_view
def endpoint_detail(request: HttpRequest, endpoint_id: str) -> HttpResponse:
    """GET: the endpoint, its edit form and its deliveries. POST: save the edit."""
    endpoint = _endpoint_or_404(request, endpoint_id)
    status = 200
    if request.method == "POST":
        form = EndpointEditForm(request.POST)
        if form.is_valid():
            try:
                services.update_endpoint(
                    principal=principal_for(request),
                    endpoint_id=endpoint.id,
                    url=form.cleaned_data["url"],
                    events=form.cleaned_data["events"],
                    description=form.cleaned_data["description"],
                    active=form.cleaned_data["active"],
                )
            except services.WebhookError as exc:
                form.add_error(exc.field if exc.field in form.fields else None, str(exc))
            else:
                messages.success(request, "Saved.")
                return redirect("webhooks:detail", endpoint.id)
        status = 400
    else:
        form = EndpointEditForm(
            initial={
                "url": endpoint.url,
                "events": endpoint.events,
                "description": endpoint.description,
                "active": endpoint.active,
            }
        )
    shown = request.GET.get("status", "")
    if shown and shown not in WebhookDelivery.Status.values:
        messages.error(
            request,
            f"Unknown delivery status {shown[:40]!r}: choose "
            + ", ".join(WebhookDelivery.Status.values)
            + ". All deliveries are shown.",
        )
        shown, status = "", 400
    deliveries, cursor = selectors.deliveries_page(
        endpoint, before=_before(request.GET.get("before")), status=shown or None
    )
    return render(
        request,
        "webhooks/detail.html",
        {
            "endpoint": endpoint,
            "form": form,
            "deliveries": deliveries,
            "next_before": f"{cursor[0]}|{cursor[1]}" if cursor else None,
            "shown_status": shown,
            "statuses": [("", "All"), *WebhookDelivery.Status.choices],
            "event_help": SUBSCRIBABLE,
        },
        status=status,
    )


@require_POST
@dashboard_view
def endpoint_test(request: HttpRequest, endpoint_id: str) -> HttpResponse:
    """Queue a signed ``webhook.test`` delivery and go back to the endpoint's page."""
    try:
        delivery = services.send_test_event(
            principal=principal_for(request), endpoint_id=endpoint_id
        )
    except access.AccessDenied as exc:
        raise Http404("no such webhook endpoint") from exc
    messages.success(request, f"Test event {delivery.id} queued; its status is below.")
    return redirect("webhooks:detail", endpoint_id)


@never_cache
@require_POST
@dashboard_view
def endpoint_rotate(request: HttpRequest, endpoint_id: str) -> HttpResponse:
    """Give the endpoint a new secret and show it once."""
    try:
        issued = services.rotate_secret(principal=principal_for(request), endpoint_id=endpoint_id)
    except access.AccessDenied as exc:
        raise Http404("no such webhook endpoint") from exc
    return _created(request, issued, rotated=True)


@never_cache
@require_http_methods(["GET", "POST"])
@dashboard_view
def endpoint_delete(request: HttpRequest, endpoint_id: str) -> HttpResponse:
    """GET: confirm. POST: delete the endpoint and its delivery history."""
    endpoint = _endpoint_or_404(request, endpoint_id)
    if request.method == "GET":
        return render(
            request,
            "webhooks/delete.html",
            {"endpoint": endpoint, "delivery_count": endpoint.deliveries.count()},
        )
    services.delete_endpoint(principal=principal_for(request), endpoint_id=endpoint.id)
    messages.success(request, f"Endpoint {endpoint.id} is deleted; it receives nothing more.")
    return redirect("webhooks:list")


@require_POST
@dashboard_view
def delivery_retry(request: HttpRequest, delivery_id: str) -> HttpResponse:
    """Retry a pending or failed delivery now."""
    try:
        delivery = services.retry_delivery(
            principal=principal_for(request), delivery_id=delivery_id
        )
    except access.AccessDenied as exc:
        raise Http404("no such webhook delivery") from exc
    except services.WebhookError as exc:
        messages.error(request, str(exc))
        return redirect("webhooks:list")
    messages.success(request, f"Delivery {delivery.id} queued again.")
    return redirect("webhooks:detail", delivery.endpoint_id)
