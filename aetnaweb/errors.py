"""The error catalogue: every refusal the engine makes on purpose is a :class:`DomainError`.

A domain error carries, on its class, a stable snake_case ``code`` (what the
API sends as ``error`` and what clients branch on), the HTTP ``status`` it
answers with, and a one-line ``meaning`` (what the OpenAPI document and
docs/agents.md list). An instance may name the request ``field`` at fault.
The message is a sentence a person can act on.

Each class that sets ``code`` registers itself in :data:`CATALOGUE` when it is
defined, so the list the API documents is built from the classes themselves:
adding an error class documents its code. Subclasses keep the built-in bases
callers rely on (``ValueError``, ``KeyError``, ...; the guarded-actions spec's
"A19. Error catalogue" names them), so this base sits beside them.

The kernel imports no app; apps import this module.
"""

from __future__ import annotations

from typing import ClassVar

# The statuses a domain refusal may answer with. 401 and 429 belong to the
# transport (token and rate limit), 500 to bugs: a domain error is never one.
ALLOWED_STATUSES = frozenset({400, 403, 404, 409, 410, 422, 503})


class DomainError(Exception):
    """Base class: a refusal with a stable ``code``, an HTTP ``status`` and an actionable message."""

    code: ClassVar[str] = "domain_error"
    status: ClassVar[int] = 400
    meaning: ClassVar[str] = "a refusal of the engine (see detail)"
    # Further codes an instance may carry instead of the class's (e.g. a forget
    # refusal's reason); each is documented under the class's status.
    extra_codes: ClassVar[dict[str, str]] = {}
    # Set by an instance that answers with one of its class's extra codes.
    instance_code: str | None = None
    # "No such thing": a page whose URL names it answers 404 even when the API,
    # whose body named it, answers with the class's 4xx (see dashboard_view).
    missing: ClassVar[bool] = False

    def __init__(self, *args: object, field: str | None = None) -> None:
        super().__init__(*args)
        self.field = field

    def __init_subclass__(cls, **kwargs: object) -> None:
        super().__init_subclass__(**kwargs)
        # Only a class that states its own code is an entry; one that inherits
        # its parent's shares the parent's entry.
        if "code" in cls.__dict__:
            _register(cls)

    def __str__(self) -> str:
        # KeyError's default str() is the repr of its argument; keep messages plain.
        return str(self.args[0]) if self.args else self.meaning

    @property
    def error_code(self) -> str:
        """The code this refusal answers with (an instance may refine the class's)."""
        return self.instance_code or self.code

    @property
    def detail(self) -> str:
        """The sentence the API sends as ``detail`` (a subclass may leave the field out of it)."""
        return str(self)


CATALOGUE: dict[str, type[DomainError]] = {}
"""Every registered code -> the class that declares it (one class per code)."""


def _register(cls: type[DomainError]) -> None:
    if cls.status not in ALLOWED_STATUSES:
        raise TypeError(f"{cls.__qualname__}.status {cls.status} is not one of {ALLOWED_STATUSES}")
    for code in (cls.code, *cls.__dict__.get("extra_codes", {})):
        holder = CATALOGUE.get(code)
        if holder is not None and issubclass(cls, holder):
            # A refinement (UnstorableText is an InvalidInput) answers with its
            # base's code; the base stays the catalogue's entry.
            if cls.status != holder.status:
                raise TypeError(f"{cls.__qualname__} answers {code!r} with another status")
            continue
        # Re-importing a module (tests do) redefines the same class: not a clash.
        if holder is not None and holder.__qualname__ != cls.__qualname__:
            raise TypeError(f"error code {code!r} is declared by {holder.__qualname__} too")
        CATALOGUE[code] = cls


class InvalidInput(DomainError, ValueError):
    """A value a service refuses as bad input; ``field`` names it.

    The same refusal the API's schemas give (``invalid_field``) when a caller
    that skips them (a command, the MCP server, a view) sends the value.
    Never a state problem: that is a 409 class of the app's own.
    """

    code = "invalid_field"
    status = 400
    meaning = "a field does not validate (see field and detail)"

    def __init__(self, message: str, *, field: str) -> None:
        super().__init__(message, field=field)


def documented_codes() -> dict[int, dict[str, str]]:
    """By status, each code the registered classes answer with and what it means.

    A 404 answers ``not_found`` whatever the class (existence never leaks), so
    404 classes add no code of their own to what the API documents.
    """
    codes: dict[int, dict[str, str]] = {}
    for code, cls in CATALOGUE.items():
        if cls.status == 404:
            continue
        meaning = cls.extra_codes.get(code, cls.meaning) if code != cls.code else cls.meaning
        codes.setdefault(cls.status, {})[code] = meaning
    return codes


def catalogue_markdown() -> str:
    """The catalogue as the Markdown table docs/agents.md carries (a test compares them).

    One row per code: status, code, the class that raises it, and its meaning;
    a 404 class is listed with the ``not_found`` it answers with.
    """
    rows = ["| status | `error` | raised as | meaning |", "| --- | --- | --- | --- |"]
    for code, cls in sorted(CATALOGUE.items(), key=lambda item: (item[1].status, item[0])):
        meaning = cls.meaning if code == cls.code else cls.extra_codes[code]
        wire = "not_found" if cls.status == 404 else code
        shown = f"`{wire}`" if wire == code else f"`{wire}` (`{code}`)"
        rows.append(f"| {cls.status} | {shown} | `{cls.__name__}` | {meaning} |")
    return "\n".join(rows) + "\n"
