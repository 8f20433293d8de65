"""WSGI entry point (gunicorn: ``aetnaweb.wsgi``; see ``aetnaweb/gunicorn_conf.py``)."""

from __future__ import annotations

import os
from pathlib import Path

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from django.core.wsgi import get_wsgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "aetnaweb.settings")
application = get_wsgi_application()


def check_collected_static() -> None:
    """Production serves collected files only: refuse to start without them.

    Without this check the server starts and every page loads unstyled, with
    a 404 per asset, which is much harder to diagnose than one line at startup.
    """
    if not settings.PRODUCTION:
        return
    root = settings.STATIC_ROOT
    if not (Path(root) / "css").is_dir():
        raise ImproperlyConfigured(
            f"STATIC_ROOT {root} holds no collected files; run "
            "`python manage.py collectstatic --noinput` before starting (make serve does)."
        )


check_collected_static()
