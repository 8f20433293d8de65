"""``manage.py access``: operator grants and agent API tokens from the command line.

Sub-verbs (each a thin wrapper over :mod:`access.grants` or :mod:`access.tokens`)::

    access grant USER SCOPE ROLE
    access revoke USER SCOPE ROLE
    access list [--user USER]
    access token create --name N --scope S --capabilities read,write --expires-days 30 [--owner USER]
    access token list
    access token revoke PREFIX

Every refusal (an invalid scope, an unknown user or role, a duplicate grant,
an unknown token) is one line on stderr and exit status 2, and writes nothing.
The command runs as the trusted system principal (audit actor ``system``).
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandParser
from django.utils import timezone

from access import grants, tokens
from access.models import ApiToken, Role
from aetnaweb.access import system_principal
from aetnaweb.cli import refusals_exit, refuse


class Command(BaseCommand):
    help = "Manage operator scope grants and agent API tokens."

    def add_arguments(self, parser: CommandParser) -> None:
        verbs = parser.add_subparsers(dest="verb", required=True, metavar="VERB")

        grant = verbs.add_parser("grant", help="give USER a ROLE on SCOPE and its descendants")
        revoke = verbs.add_parser("revoke", help="remove USER's ROLE on exactly SCOPE")
        for sub in (grant, revoke):
            sub.add_argument("user", help="username")
            sub.add_argument("scope", help="tenant:user:project, e.g. acme:*:*")
            sub.add_argument("role", help=f"one of {', '.join(Role.values)}")

        listing = verbs.add_parser("list", help="list grants")
        listing.add_argument("--user", help="only this user's grants")

        token = verbs.add_parser("token", help="agent API tokens")
        token_verbs = token.add_subparsers(dest="token_verb", required=True, metavar="TOKEN_VERB")
        create = token_verbs.add_parser("create", help="issue a token (the secret is shown once)")
        create.add_argument("--name", required=True)
        create.add_argument("--scope", required=True, help="the token's subtree")
        create.add_argument(
            "--capabilities",
            required=True,
            help="comma-separated: read, write, forget, propose, stage, audit",
        )
        create.add_argument("--expires-days", type=int, default=30, dest="expires_days")
        create.add_argument("--owner", help="username of the account responsible for the agent")
        token_verbs.add_parser("list", help="list tokens (never their secrets)")
        revoke_token = token_verbs.add_parser("revoke", help="revoke a token by its prefix")
        revoke_token.add_argument("prefix")

    def handle(self, *args: Any, **options: Any) -> None:
        verb = options["verb"]
        if verb == "token":
            verb = f"token {options['token_verb']}"
        handlers = {
            "grant": self._grant,
            "revoke": self._revoke,
            "list": self._list,
            "token create": self._token_create,
            "token list": self._token_list,
            "token revoke": self._token_revoke,
        }
        with refusals_exit():
            handlers[verb](options)

    # -- grants -----------------------------------------------------------------

    def _user(self, username: str) -> Any:
        user = get_user_model().objects.filter(username=username).first()
        if user is None:
            raise refuse(
                f"no user named {username!r}: create it first (manage.py createsuperuser or the admin)"
            )
        return user

    def _grant(self, options: dict[str, Any]) -> None:
        user = self._user(options["user"])
        grant = grants.grant_role(
            user=user, scope=options["scope"], role=options["role"], principal=system_principal()
        )
        self.stdout.write(f"granted {grant.role} on {grant.scope} to {user.get_username()}")

    def _revoke(self, options: dict[str, Any]) -> None:
        user = self._user(options["user"])
        grants.revoke_role(
            user=user, scope=options["scope"], role=options["role"], principal=system_principal()
        )
        self.stdout.write(
            f"revoked {options['role']} on {options['scope']} from {user.get_username()}"
        )

    def _list(self, options: dict[str, Any]) -> None:
        user = self._user(options["user"]) if options.get("user") else None
        rows = grants.grants_of(user=user)
        if not rows:
            self.stdout.write("no grants")
            return
        width = max(len(row.user.get_username()) for row in rows)
        for row in rows:
            self.stdout.write(
                f"{row.user.get_username():<{width}}  {row.role:<8}  {row.scope}"
                f"  (since {row.created_at:%Y-%m-%d}{', by ' + row.created_by if row.created_by else ''})"
            )

    # -- tokens -----------------------------------------------------------------

    def _token_create(self, options: dict[str, Any]) -> None:
        owner = self._user(options["owner"]) if options.get("owner") else None
        capabilities = [cap.strip() for cap in options["capabilities"].split(",") if cap.strip()]
        days = options["expires_days"]
        if days < 1:
            raise refuse("--expires-days must be at least 1")
        issued = tokens.create_token(
            principal=system_principal(),
            name=options["name"],
            scope=options["scope"],
            capabilities=capabilities,
            expires_at=timezone.now() + timedelta(days=days),
            owner=owner,
        )
        token = issued.token
        self.stdout.write(
            f"created token {token.token_prefix} {token.name!r} on {token.scope} "
            f"({', '.join(token.capabilities)}), expires {token.expires_at:%Y-%m-%d %H:%M} UTC"
        )
        self.stdout.write("the secret is shown once; store it now:")
        self.stdout.write(issued.secret)

    def _token_list(self, options: dict[str, Any]) -> None:
        rows = list(ApiToken.objects.select_related("owner").order_by("-created_at"))
        if not rows:
            self.stdout.write("no tokens")
            return
        now = timezone.now()
        for token in rows:
            if token.revoked_at is not None:
                status = f"revoked {token.revoked_at:%Y-%m-%d}"
            elif token.expires_at <= now:
                status = "expired"
            else:
                status = f"active until {token.expires_at:%Y-%m-%d}"
            owner = token.owner.get_username() if token.owner else "-"
            used = f"{token.last_used_at:%Y-%m-%d %H:%M}" if token.last_used_at else "never"
            self.stdout.write(
                f"{token.token_prefix}  {token.name}  {token.scope}  {','.join(token.capabilities)}"
                f"  owner={owner}  {status}  last used {used}"
            )

    def _token_revoke(self, options: dict[str, Any]) -> None:
        token = tokens.revoke_token(token_prefix=options["prefix"], principal=system_principal())
        self.stdout.write(f"revoked token {token.token_prefix} {token.name!r} on {token.scope}")
