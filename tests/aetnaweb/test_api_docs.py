"""The API reference page: served from our own static files, under the CSP, for signed-in people."""

from __future__ import annotations

import re

import pytest
from django.contrib.staticfiles import finders


@pytest.mark.django_db
def test_anonymous_visitors_are_sent_to_sign_in(client):
    response = client.get("/api/docs/")
    assert response.status_code == 302
    assert response["Location"].startswith("/login/")


@pytest.mark.django_db
def test_the_page_loads_swagger_ui_from_our_static_files_with_nonces(signed_in):
    # Given a signed-in operator
    client = signed_in("vera", [("acme:*:*", "viewer")])
    # When they open the API reference
    response = client.get("/api/docs/")
    html = response.content.decode()
    # Then every script and stylesheet is ours (no CDN), each script carries the CSP nonce
    assert response.status_code == 200
    sources = re.findall(r'<(?:script|link)[^>]*(?:src|href)="([^"]+)"', html)
    assert sources and all(src.startswith("/") for src in sources), sources
    assert "cdn" not in html.lower()
    nonce = re.search(r"'nonce-([^']+)'", response["Content-Security-Policy"]).group(1)
    scripts = re.findall(r"<script[^>]*>", html)
    executable = [tag for tag in scripts if "application/json" not in tag]
    assert executable and all(f'nonce="{nonce}"' in tag for tag in executable)
    # And the settings point at the served document, with the swagger.io validator off
    assert '"url": "/api/v1/openapi.json"' in html
    assert '"validatorUrl": null' in html
    # And the assets exist in the static files
    for asset in ("ninja/swagger-ui-bundle.js", "ninja/swagger-ui.css", "js/api-docs.js"):
        assert finders.find(asset), asset


@pytest.mark.django_db
def test_the_dashboard_links_to_the_api_reference(signed_in):
    client = signed_in("vera", [("acme:*:*", "viewer")])
    assert 'href="/api/docs/"' in client.get("/").content.decode()
