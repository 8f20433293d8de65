from __future__ import annotations

from django.test import Client


def test_stylesheet_is_served_without_debug_or_login(settings):
    # Given debug off and no session (as `make run` serves the dashboard)
    assert settings.DEBUG is False
    # When the browser asks for the stylesheet and htmx
    css = Client().get("/static/css/aetnaweb.css")
    htmx = Client().get("/static/django_htmx/htmx-2.min.js")
    # Then both come from the app itself, no CDN and no separate web server
    assert css.status_code == 200
    assert b".topbar" in b"".join(css.streaming_content)
    assert htmx.status_code == 200
