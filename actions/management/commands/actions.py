"""``manage.py actions``: guarded actions from the command line.

Sub-verbs, each a thin wrapper over :mod:`actions.services` or :mod:`actions.selectors`::

    actions stage --scope S --plan FILE|- [--mode enforce|preview|observe] [--actor agent]
    actions show ID [--as USER]
    actions list [--scope S] [--state STATE ...] [--after ID] [--limit N] [--as USER]
    actions approve ID --as USER [--approval-key-file FILE]
    actions deny ID --as USER --reason TEXT
    actions commit ID --as USER [--approval-key-file FILE]
    actions abort ID --as USER [--reason TEXT]
    actions recover ID --as USER
    actions verify ID [--as USER] [--approval-key-file FILE]
    actions purge-payloads ID --as USER
    actions import-journal PATH --scope S [--actor journal-importer]

Deciding verbs act as a named operator (``--as``), whose grants are checked
and whose username is the approver label; approval is signed with the key
from ``AETNAWEB_APPROVAL_KEY`` / ``AETNAWEB_APPROVAL_KEY_FILE`` (or
``--approval-key-file``), at least 32 bytes. Staging and import run as the
trusted in-process caller with the given actor label. Every refusal is one
line on stderr and exit status 2, and writes nothing; ``verify`` exits 1 when
verification fails.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError, CommandParser

from actions import formats, selectors, services
from actions.approvals import ApprovalAuthority, read_key_file
from aetnaweb.access import AccessDenied, Principal, operator_principal, system_principal
from aetnaweb.cli import refuse
from aetnaweb.errors import DomainError


class Command(BaseCommand):
    help = "Stage, inspect, approve, commit, abort, recover and verify guarded actions."

    def add_arguments(self, parser: CommandParser) -> None:
        verbs = parser.add_subparsers(dest="verb", required=True, metavar="VERB")

        stage = verbs.add_parser("stage", help="stage a plan from a JSON file (or - for stdin)")
        stage.add_argument("--scope", required=True, help="tenant:user:project")
        stage.add_argument(
            "--plan",
            required=True,
            help='JSON: a list of operations, or {"operations": [...]}; - reads stdin',
        )
        stage.add_argument("--mode", default=formats.MODE_ENFORCE, choices=formats.MODES)
        stage.add_argument("--actor", default="agent", help="the proposing actor's label")
        stage.add_argument("--session-id", dest="session_id")
        stage.add_argument("--turn-id", dest="turn_id")

        show = verbs.add_parser("show", help="show one transaction as JSON")
        show.add_argument("transaction_id")
        show.add_argument("--as", dest="as_user", help="view as this user (default: everything)")

        listing = verbs.add_parser("list", help="list transactions, newest first")
        listing.add_argument("--scope", help="only this scope and its descendants")
        listing.add_argument(
            "--state", action="append", dest="states", choices=formats.TRANSACTION_STATES
        )
        listing.add_argument("--after", help="continue after this transaction ID")
        listing.add_argument("--limit", type=int, default=50)
        listing.add_argument("--as", dest="as_user", help="list as this user")

        for name, text in (
            ("approve", "approve a plan awaiting approval (signed with the server key)"),
            ("commit", "execute an approved plan"),
            ("abort", "abort a plan that has not started executing"),
            ("deny", "refuse a plan, with a reason"),
            ("recover", "fence a run that died mid-commit (recovery_required)"),
            ("purge-payloads", "blank the stored content of a finished transaction"),
        ):
            sub = verbs.add_parser(name, help=text)
            sub.add_argument("transaction_id")
            sub.add_argument(
                "--as", dest="as_user", required=True, help="the operator acting (a real user)"
            )
            if name in ("approve", "commit"):
                sub.add_argument("--approval-key-file", dest="key_file")
            if name == "abort":
                sub.add_argument("--reason", default="")
            if name == "deny":
                sub.add_argument("--reason", required=True)

        verify = verbs.add_parser("verify", help="verify a transaction's bindings and receipts")
        verify.add_argument("transaction_id")
        verify.add_argument("--as", dest="as_user", help="verify as this user")
        verify.add_argument("--approval-key-file", dest="key_file")

        journal = verbs.add_parser("import-journal", help="import an external transaction journal")
        journal.add_argument("path")
        journal.add_argument("--scope", required=True)
        journal.add_argument("--actor", default="journal-importer")

    def handle(self, *args: Any, **options: Any) -> None:
        handlers = {
            "stage": self._stage,
            "show": self._show,
            "list": self._list,
            "approve": self._approve,
            "deny": self._deny,
            "commit": self._commit,
            "abort": self._abort,
            "recover": self._recover,
            "verify": self._verify,
            "purge-payloads": self._purge,
            "import-journal": self._import_journal,
        }
        try:
            handlers[options["verb"]](options)
        except AccessDenied as exc:
            # An out-of-reach transaction reads like a missing one (the message says both).
            raise refuse(f"refused: {exc} (or no such transaction)") from exc
        except DomainError as exc:
            raise refuse(exc) from exc

    # -- helpers ------------------------------------------------------------------

    def _emit(self, value: Any) -> None:
        self.stdout.write(json.dumps(value, indent=2, sort_keys=True))

    def _principal(self, username: str | None) -> Principal:
        if not username:
            return system_principal()
        user = get_user_model().objects.filter(username=username).first()
        if user is None or not user.is_active:
            raise refuse(f"no active user named {username!r}")
        return operator_principal(user)

    def _authority(self, options: dict[str, Any]) -> ApprovalAuthority | None:
        key_file = options.get("key_file")
        if not key_file:
            return None
        return ApprovalAuthority(
            read_key_file(key_file), ttl_seconds=int(settings.AETNAWEB_APPROVAL_TTL_SECONDS)
        )

    # -- verbs ----------------------------------------------------------------------

    def _stage(self, options: dict[str, Any]) -> None:
        source = options["plan"]
        try:
            text = sys.stdin.read() if source == "-" else Path(source).read_text(encoding="utf-8")
        except OSError as exc:
            raise refuse(f"cannot read the plan file {source!r}: {exc.strerror or exc}") from exc
        try:
            document = json.loads(text)
        except ValueError as exc:
            raise refuse(f"the plan is not valid JSON: {exc}") from exc
        operations = document.get("operations") if isinstance(document, dict) else document
        patch = services.stage(
            scope=options["scope"],
            operations=operations if operations is not None else [],
            mode=options["mode"],
            session_id=options.get("session_id"),
            turn_id=options.get("turn_id"),
            principal=system_principal(),
            actor=options["actor"],
        )
        self._emit(patch.as_dict())

    def _show(self, options: dict[str, Any]) -> None:
        principal = self._principal(options.get("as_user"))
        self._emit(selectors.transaction_detail(principal, options["transaction_id"]).as_dict())

    def _list(self, options: dict[str, Any]) -> None:
        principal = self._principal(options.get("as_user"))
        page = selectors.list_transactions(
            principal,
            scope=options.get("scope"),
            states=options.get("states"),
            after=options.get("after"),
            limit=options["limit"],
        )
        for item in page.items:
            self.stdout.write(
                f"{item['transaction_id']}  {item['state']:<18} {item['mode']:<8} "
                f"{item['subject_id']}  {item['created_at']}"
            )
        if page.next_after:
            self.stdout.write(f"(more: --after {page.next_after})")

    def _approve(self, options: dict[str, Any]) -> None:
        principal = self._principal(options["as_user"])
        result = services.approve(
            transaction_id=options["transaction_id"],
            principal=principal,
            authority=self._authority(options),
        )
        self._emit(result.as_dict())

    def _deny(self, options: dict[str, Any]) -> None:
        principal = self._principal(options["as_user"])
        self._emit(
            services.deny(
                transaction_id=options["transaction_id"],
                reason=options["reason"],
                principal=principal,
            ).as_dict()
        )

    def _commit(self, options: dict[str, Any]) -> None:
        principal = self._principal(options["as_user"])
        result = services.commit(
            transaction_id=options["transaction_id"],
            principal=principal,
            authority=self._authority(options),
        )
        self._emit(result.as_dict())

    def _abort(self, options: dict[str, Any]) -> None:
        principal = self._principal(options["as_user"])
        self._emit(
            services.abort(
                transaction_id=options["transaction_id"],
                principal=principal,
                reason=options.get("reason") or "",
            ).as_dict()
        )

    def _recover(self, options: dict[str, Any]) -> None:
        principal = self._principal(options["as_user"])
        self._emit(
            services.recover(
                transaction_id=options["transaction_id"], principal=principal
            ).as_dict()
        )

    def _verify(self, options: dict[str, Any]) -> None:
        principal = self._principal(options.get("as_user"))
        report = services.verify(
            transaction_id=options["transaction_id"],
            principal=principal,
            authority=self._authority(options),
        )
        if report.valid:
            self.stdout.write(f"OK   {report.transaction_id}")
            return
        self.stdout.write(f"FAIL {report.transaction_id}")
        for failure in report.failures:
            self.stdout.write(f"     - {failure}")
        raise CommandError("verification failed", returncode=1)

    def _purge(self, options: dict[str, Any]) -> None:
        principal = self._principal(options["as_user"])
        self._emit(
            services.purge_payloads(
                transaction_id=options["transaction_id"], principal=principal
            ).as_dict()
        )

    def _import_journal(self, options: dict[str, Any]) -> None:
        self._emit(
            services.import_journal(
                scope=options["scope"],
                path=options["path"],
                principal=system_principal(),
                actor=options["actor"],
            ).as_dict()
        )
