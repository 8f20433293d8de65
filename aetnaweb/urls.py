"""URL configuration: each app mounts its own ``urls.py`` with ``app_name`` set."""

from __future__ import annotations

from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.urls import include, path, re_path
from django.views.generic import RedirectView

from access import login_views
from access import urls as access_urls
from aetnaweb import views
from aetnaweb.api_urls import api_urls

# The admin's own sign-in page counts failures like /login/ does.
admin.site.login_form = login_views.ThrottledAdminAuthenticationForm

urlpatterns = [
    path("", views.home, name="home"),
    path("healthz", views.healthz, name="healthz"),
    path("search/", views.search, name="search"),
    path("login/", login_views.login_view, name="login"),
    path("logout/", auth_views.LogoutView.as_view(), name="logout"),
    # The admin pages of the models that moved into the access app (issue 11):
    # old bookmarks land on the new pages instead of a 404.
    re_path(
        r"^admin/aetnaweb/(?P<rest>(?:apitoken|scopegrant|loginthrottle|idempotencykey|ratelimitwindow)/.*)$",
        RedirectView.as_view(url="/admin/access/%(rest)s", query_string=True),
    ),
    path("admin/", admin.site.urls),
    path("api/v1/", api_urls()),
    path("api/docs/", views.api_docs, name="api-docs"),
    path("access/people/", include(access_urls.people)),
    path("access/tokens/", include(access_urls.tokens)),
    path("access/lockouts/", include(access_urls.lockouts)),
    path("maintenance/", include("aetnaweb.maintenance_urls")),
    path("jobs/", include("jobs.urls")),
    path("audit/", include("audit.urls")),
    path("actions/", include("actions.urls")),
    path("memory/", include("memory.urls")),
    path("webhooks/", include("webhooks.urls")),
]

# A database fault (full disk, read-only file, no free connections) is a 503
# saying so; anything else the usual 500 page (JSON under /api/v1/).
handler500 = "aetnaweb.views.server_error"
