"""The kernel API learns who a token is only from the access app, and refuses everything until then."""

from __future__ import annotations

import pytest
from django.test import RequestFactory
from django.urls import reverse

from access import api as access_api
from aetnaweb.api import ApiError, TokenBearer, token_bearer


def test_a_bearer_without_an_authenticator_refuses_every_token():
    # Given a bearer nobody has installed an authenticator on
    bearer = TokenBearer()
    request = RequestFactory().get("/api/v1/token", HTTP_AUTHORIZATION="Bearer aetna_x_y")
    # When a request carries a token / Then it is a 401, never a pass
    with pytest.raises(ApiError) as refused:
        bearer(request)
    assert (refused.value.status, refused.value.error) == (401, "unauthorized")
    assert not hasattr(request, "principal")


def test_building_the_urls_installs_the_access_apps_authenticator():
    # Given the URLconf loaded (it mounts every app's API) / Then the access app says who tokens are
    reverse("home")
    assert token_bearer.authenticator is access_api.authenticate_bearer


@pytest.mark.django_db
def test_missing_and_malformed_headers_are_refused_by_the_kernel_with_the_same_words(client):
    # Given no header, then a non-bearer header / Then 401 with the messages agents already know
    missing = client.get("/api/v1/token")
    malformed = client.get("/api/v1/token", HTTP_AUTHORIZATION="Basic abc")
    assert missing.status_code == malformed.status_code == 401
    assert missing.json()["detail"] == "missing API token: send 'Authorization: Bearer <token>'"
    assert malformed.json()["detail"] == "malformed Authorization header: expected 'Bearer <token>'"
    assert missing["WWW-Authenticate"] == 'Bearer realm="aetnaweb"'
