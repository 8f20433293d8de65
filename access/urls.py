"""The access pages' URLs, mounted by ``aetnaweb/urls.py`` under three namespaces.

``/access/people/`` is ``people:list``, ``people:person`` and the acts on a
person, plus ``people:join`` (the invitee's one-time link, no sign-in).

``/access/tokens/`` is ``tokens:list`` and ``tokens:revoke``; ``/access/lockouts/``
is ``lockouts:list`` and ``lockouts:clear`` (the names from before the pages
moved into this app, so templates and bookmarks keep working).
"""

from __future__ import annotations

from django.urls import URLPattern, path

from access import views

tokens: tuple[list[URLPattern], str] = (
    [
        path("", views.token_list, name="list"),
        path("<str:prefix>/revoke/", views.token_revoke, name="revoke"),
    ],
    "tokens",
)

lockouts: tuple[list[URLPattern], str] = (
    [
        path("", views.lockout_list, name="list"),
        path("<int:throttle_id>/clear/", views.lockout_clear, name="clear"),
    ],
    "lockouts",
)

people: tuple[list[URLPattern], str] = (
    [
        path("", views.people_list, name="list"),
        path("<int:user_id>/", views.person_detail, name="person"),
        path("<int:user_id>/grants/<int:grant_id>/revoke/", views.grant_revoke, name="revoke"),
        path("<int:user_id>/deactivate/", views.person_deactivate, name="deactivate"),
        path("<int:user_id>/reactivate/", views.person_reactivate, name="reactivate"),
        path(
            "invitations/<int:invitation_id>/revoke/",
            views.invitation_revoke,
            name="revoke_invitation",
        ),
        path("join/<str:token>/", views.join, name="join"),
    ],
    "people",
)
