"""Django admin for grants and tokens.

Grants are added and removed through :mod:`access.grants` (validated and
audited like every other write); a grant is never edited in place: revoke it
and grant again. API tokens are read-only here: they are issued and revoked
with ``manage.py access token`` or the dashboard token page, because the
secret must be shown once to the person who asked for it.
"""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import admin
from django.contrib.auth import get_user_model
from django.contrib.auth.admin import UserAdmin
from django.core.exceptions import PermissionDenied
from django.db import transaction
from django.db.models import QuerySet
from django.http import HttpRequest

from access import grants
from access.models import ApiToken, ScopeGrant
from aetnaweb import access
from aetnaweb.scopes import Scope, ScopeError
from aetnaweb.text import StorableTextMixin


class ScopeGrantForm(StorableTextMixin, forms.ModelForm):
    """Parses the scope exactly (never repairs it) and checks the signed-in admin may grant there."""

    request: HttpRequest | None = None

    class Meta:
        model = ScopeGrant
        fields = ["user", "scope", "role"]
        help_texts = {
            "scope": "tenant:user:project, e.g. acme:*:* (a tenant), acme:alice:* (a person), "
            "platform:*:* (everything). The grant covers the scope and its descendants."
        }

    def clean_scope(self) -> str:
        try:
            return str(Scope.parse(self.cleaned_data["scope"]))
        except ScopeError as exc:
            raise forms.ValidationError(str(exc)) from exc

    def clean(self) -> dict[str, Any]:
        cleaned = super().clean() or {}
        scope = cleaned.get("scope")
        if scope and self.request is not None:
            try:
                grants.require_grant_admin(
                    access.operator_principal(self.request.user), Scope.parse(scope)
                )
            except access.AccessDenied as exc:
                raise forms.ValidationError(
                    f"You need the admin role on {scope} or a scope above it to grant roles there."
                ) from exc
        return cleaned


@admin.register(ScopeGrant)
class ScopeGrantAdmin(admin.ModelAdmin):
    form = ScopeGrantForm
    list_display = ["user", "role", "scope", "created_at", "created_by"]
    list_filter = ["role", "scope_tenant"]
    search_fields = ["user__username", "scope"]
    ordering = ["user__username", "scope", "role"]
    list_select_related = ["user"]

    def get_form(
        self, request: HttpRequest, obj: Any = None, change: bool = False, **kwargs: Any
    ) -> Any:
        form_class = super().get_form(request, obj, change=change, **kwargs)
        return type(form_class.__name__, (form_class,), {"request": request})

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        # A grant is revoked and granted again, never edited: the audit chain
        # records exactly two kinds of change.
        return False

    def save_model(self, request: HttpRequest, obj: ScopeGrant, form: Any, change: bool) -> None:
        created = grants.grant_role(
            user=obj.user,
            scope=obj.scope,
            role=obj.role,
            principal=access.operator_principal(request.user),
        )
        obj.pk = created.pk
        obj.scope_tenant, obj.scope_user, obj.scope_project = (
            created.scope_tenant,
            created.scope_user,
            created.scope_project,
        )
        obj.created_at, obj.created_by = created.created_at, created.created_by

    def delete_model(self, request: HttpRequest, obj: ScopeGrant) -> None:
        grants.revoke_role(
            user=obj.user,
            scope=obj.scope,
            role=obj.role,
            principal=access.operator_principal(request.user),
        )

    def delete_queryset(self, request: HttpRequest, queryset: QuerySet[ScopeGrant]) -> None:
        for grant in queryset.select_related("user"):
            self.delete_model(request, grant)

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        if not super().has_delete_permission(request, obj):
            return False
        if obj is None:
            return True
        try:
            grants.require_grant_admin(
                access.operator_principal(request.user), Scope.parse(obj.scope)
            )
        except access.AccessDenied:
            return False
        return True


@admin.register(ApiToken)
class ApiTokenAdmin(admin.ModelAdmin):
    """Read-only: the secret exists only at creation, which happens elsewhere."""

    list_display = [
        "token_prefix",
        "name",
        "scope",
        "owner",
        "expires_at",
        "revoked_at",
        "last_used_at",
    ]
    list_filter = ["scope_tenant"]
    search_fields = ["token_prefix", "name", "scope"]
    exclude = ["token_hash"]
    readonly_fields = [
        "name",
        "owner",
        "scope",
        "scope_tenant",
        "scope_user",
        "scope_project",
        "capabilities",
        "token_prefix",
        "created_at",
        "expires_at",
        "revoked_at",
        "last_used_at",
    ]

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


class AuditedUserAdmin(UserAdmin):  # type: ignore[type-arg]
    """Django's user admin, except that deleting a user revokes their grants through the service.

    The grant rows would otherwise vanish by ``ON DELETE CASCADE`` with no
    ``access.grant_revoked`` event: an auditor could no longer tell when,
    or by whom, that person's access ended.
    """

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        if not super().has_delete_permission(request, obj):
            return False
        return obj is None or grants.may_delete_user(access.operator_principal(request.user), obj)

    def delete_model(self, request: HttpRequest, obj: Any) -> None:
        try:
            grants.delete_user(user=obj, principal=access.operator_principal(request.user))
        except access.AccessDenied as exc:
            raise PermissionDenied(str(exc)) from exc

    def delete_queryset(self, request: HttpRequest, queryset: QuerySet[Any]) -> None:
        # All or nothing: one user out of reach refuses the whole bulk delete.
        with transaction.atomic():
            for user in queryset:
                self.delete_model(request, user)


User = get_user_model()
if admin.site.is_registered(User):
    admin.site.unregister(User)
admin.site.register(User, AuditedUserAdmin)
