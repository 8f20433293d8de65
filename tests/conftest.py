"""Shared fixtures. Tests mirror the apps: tests/audit/..., tests/memory/..., tests/e2e/..."""

from __future__ import annotations

import pytest

from tests.factories import (  # noqa: F401  (fixtures shared by the tests below)
    authorizing_messages,
    signed_in,
)


@pytest.fixture(autouse=True)
def _fast_password_hashing(settings):
    """Production-strength PBKDF2 costs ~0.4 s per password; tests only need a working hasher."""
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


@pytest.fixture(autouse=True)
def _fresh_rate_limit_reservations():
    """Each test starts without blocks reserved by an earlier test (its rows were rolled back)."""
    from access import ratelimits

    ratelimits.forget_reservations()
    yield
    ratelimits.forget_reservations()


@pytest.fixture(autouse=True)
def _fresh_search_statistics():
    """Each test starts without the common words and split checks of an earlier test's rows."""
    from memory import search, vector_cells

    search.posting_counts.clear()
    vector_cells.forget_cached()
    yield
    search.posting_counts.clear()


@pytest.fixture
def operator(django_user_model):
    """A plain signed-in-able user with no grants."""
    return django_user_model.objects.create_user(username="operator", password="pw-operator-1")


@pytest.fixture(autouse=True)
def _export_dir(settings, tmp_path):
    """Never let a test write export files into the development data folder."""
    settings.AETNAWEB_EXPORT_DIR = tmp_path / "exports"
    return settings.AETNAWEB_EXPORT_DIR
