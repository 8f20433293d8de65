"""Login throttling: per-account and per-address counters slow, then refuse, sign-ins.

Thresholds are set small per test; time passing is simulated by moving a
counter's ``retry_at`` into the past (the rules compare against the clock).
"""

from __future__ import annotations

import json
from datetime import timedelta

import pytest
from django.urls import reverse
from django.utils import timezone

from access import lockouts
from access.models import LoginThrottle
from aetnaweb.access import system_principal
from audit.models import AuditEvent
from tests.factories import PASSWORD, login_as, make_operator

pytestmark = pytest.mark.django_db

LOGIN = "/login/"
PLATFORM = "platform:*:*"
FULLWIDTH_ALICE = "".join(chr(0xFF41 - ord("a") + ord(c)) for c in "alice")


@pytest.fixture(autouse=True)
def small_thresholds(settings):
    settings.AETNAWEB_LOGIN_SLOW_AFTER = 2
    settings.AETNAWEB_LOGIN_ACCOUNT_LOCK_AFTER = 4
    settings.AETNAWEB_LOGIN_ADDRESS_LOCK_AFTER = 6
    settings.AETNAWEB_LOGIN_LOCKOUT_SECONDS = 600
    settings.AETNAWEB_LOGIN_MAX_DELAY_SECONDS = 60


def attempt(client, username, password, address="10.0.0.1"):
    return client.post(LOGIN, {"username": username, "password": password}, REMOTE_ADDR=address)


class Event:
    """An audit row with its payload parsed (stored as canonical JSON text)."""

    def __init__(self, row: AuditEvent) -> None:
        self.subject_id, self.actor = row.subject_id, row.actor
        self.payload = json.loads(row.payload)


def events(event_type):
    return [
        Event(row) for row in AuditEvent.objects.filter(event_type=event_type).order_by("sequence")
    ]


def let_time_pass():
    """The wait of every slowed (not locked) counter is over."""
    LoginThrottle.objects.filter(locked_at__isnull=True).update(
        retry_at=timezone.now() - timedelta(seconds=1)
    )


def test_a_good_password_signs_in_and_leaves_no_counter(client):
    make_operator("alice")
    response = attempt(client, "alice", PASSWORD)
    assert response.status_code == 302
    assert not LoginThrottle.objects.exists() and not events("access.login_slowed")


def test_account_rule_slows_then_locks_even_from_many_addresses(client):
    # Given an account attacked from a new address each time
    make_operator("alice")
    addresses = iter(f"10.0.1.{n}" for n in range(1, 50))
    # When the slow-down threshold is reached
    for _ in range(2):
        assert attempt(client, "alice", "wrong", next(addresses)).status_code == 200
    # Then the next attempt is refused with a wait, before any password check: even the right one
    held = attempt(client, "alice", PASSWORD, next(addresses))
    assert held.status_code == 429 and held["Retry-After"] == "1"
    assert "wait 1 second before trying again" in held.content.decode()
    assert "_auth_user_id" not in client.session
    row = LoginThrottle.objects.get(kind="account")
    assert row.failures == 2  # a refused attempt is not counted
    # And the slow-down is audited once, naming the (existing) account, never a password
    [slowed] = events("access.login_slowed")
    assert slowed.subject_id == PLATFORM and slowed.actor == "login-throttle"
    assert slowed.payload["account"] == "alice" and slowed.payload["failures"] == 2
    assert "wrong" not in str(slowed.payload) and PASSWORD not in str(slowed.payload)
    # When the waits pass and the guessing goes on, in another letter case
    for _ in range(2):
        let_time_pass()
        assert attempt(client, "ALICE", "wrong", next(addresses)).status_code == 200
    # Then the account is locked: the right password is refused for the lockout period
    locked = attempt(client, "alice", PASSWORD, next(addresses))
    assert locked.status_code == 429 and int(locked["Retry-After"]) > 590
    assert "locked for 10 minutes" in locked.content.decode()
    [event] = events("access.login_locked")
    assert event.payload["account"] == "alice" and event.payload["kind"] == "account"
    assert event.payload["failures"] == 4 and event.payload["lockout_seconds"] == 600
    assert len(events("access.login_slowed")) == 1
    # And once the lockout has expired, the right password works and ends the streak
    LoginThrottle.objects.update(retry_at=timezone.now() - timedelta(seconds=1))
    assert attempt(client, "alice", PASSWORD, next(addresses)).status_code == 302


def test_address_rule_locks_an_address_trying_many_names(client):
    # Given one address trying a new made-up account name each time
    make_operator("bob")
    # (the first made-up name twice, so its own counter is slowed and audited too)
    for name in ["guess-0", "guess-0", "guess-1", "guess-2", "guess-3", "guess-4"]:
        let_time_pass()
        attempt(client, name, "hunter2-secret", "192.0.2.7")
    # Then that address is locked, even for a real account with its right password
    refused = attempt(client, "bob", PASSWORD, "192.0.2.7")
    assert refused.status_code == 429
    [event] = events("access.login_locked")
    assert event.payload == {
        "kind": "address",
        "address": "192.0.2.7",
        "failures": 6,
        "lockout_seconds": 600,
        "locked_until": event.payload["locked_until"],
    }
    # And another address is not affected
    assert attempt(client, "bob", PASSWORD, "192.0.2.8").status_code == 302
    # And made-up names never reach the audit log in clear (they may be mistyped passwords)
    slowed = events("access.login_slowed")
    assert slowed and all("guess-" not in str(e.payload) for e in slowed)
    unknown = [e for e in slowed if e.payload["kind"] == "account"]
    assert unknown and unknown[0].payload["account"] is None
    assert len(unknown[0].payload["account_digest"]) == 16


def test_a_success_resets_the_account_streak_but_not_the_address(client):
    make_operator("carol")
    attempt(client, "carol", "wrong", "10.0.0.9")
    assert attempt(client, "carol", PASSWORD, "10.0.0.9").status_code == 302
    assert not LoginThrottle.objects.filter(kind="account").exists()
    assert LoginThrottle.objects.get(kind="address").failures == 1


@pytest.mark.parametrize("typed", [FULLWIDTH_ALICE, " Alice ", "ALİCE\u0000", "x" * 400])
def test_odd_names_are_counted_or_refused_never_a_crash(client, typed):
    make_operator("alice")
    response = attempt(client, typed, "wrong")
    assert response.status_code == 200
    for row in LoginThrottle.objects.all():
        assert "\x00" not in row.key and len(row.key) <= 150


def test_an_encoded_lone_surrogate_in_the_form_is_counted_not_a_crash(client):
    # Given a raw form body whose name is a UTF-8-encoded lone surrogate (invalid UTF-8)
    body = "username=alice%ED%A0%80&password=wrong&csrfmiddlewaretoken=x"
    response = client.post(
        LOGIN, body, content_type="application/x-www-form-urlencoded", REMOTE_ADDR="10.0.0.2"
    )
    # Then the attempt is answered and, if counted, stored without the surrogate
    assert response.status_code == 200
    for row in LoginThrottle.objects.all():
        row.key.encode("utf-8")


def test_fullwidth_and_case_variants_share_one_account_counter():
    assert lockouts.account_key(FULLWIDTH_ALICE) == lockouts.account_key("ALICE") == "alice"
    assert lockouts.account_key("a\x00b\udc80") == "a\ufffdb\ufffd"
    assert lockouts.account_key("   ") is None


def test_client_address_ignores_what_is_not_an_ip():
    assert lockouts.client_address({"REMOTE_ADDR": "::ffff:10.0.0.1"}) == "10.0.0.1"
    assert lockouts.client_address({"REMOTE_ADDR": "2001:db8:1:2:a::1"}) == "2001:db8:1:2::/64"
    assert lockouts.client_address({"REMOTE_ADDR": "2001:db8:1:2:b::9"}) == "2001:db8:1:2::/64"
    assert lockouts.client_address({"REMOTE_ADDR": "evil\x00"}) == "unknown"
    assert lockouts.client_address({}) == "unknown"


# -- the admins' page ------------------------------------------------------------------


@pytest.fixture
def locked_alice(client):
    make_operator("alice")
    for _ in range(4):
        let_time_pass()
        attempt(client, "alice", "wrong", "10.0.3.1")
    assert LoginThrottle.objects.get(kind="account").locked_at is not None
    return LoginThrottle.objects.get(kind="account")


def test_platform_admin_sees_and_clears_a_lockout(client, locked_alice):
    # Given a platform admin
    admin = make_operator("root-admin", [(PLATFORM, "admin")])
    login_as(client, admin)
    # When they open the lockouts page
    page = client.get(reverse("lockouts:list"))
    body = page.content.decode()
    # Then the locked account is listed with a clear button (a CSRF-protected form)
    assert page.status_code == 200 and "alice" in body and ">locked<" in body
    assert reverse("lockouts:clear", args=[locked_alice.pk]) in body
    assert "csrfmiddlewaretoken" in body
    # When they clear it
    response = client.post(reverse("lockouts:clear", args=[locked_alice.pk]))
    # Then the row is gone, the unlock is audited with who did it, and alice can sign in
    assert response.status_code == 302
    assert not LoginThrottle.objects.filter(pk=locked_alice.pk).exists()
    [event] = events("access.login_unlocked")
    assert event.actor == "root-admin" and event.subject_id == PLATFORM
    assert event.payload == {
        "kind": "account",
        "account": "alice",
        "failures": 4,
        "was_locked": True,
    }
    client.logout()
    LoginThrottle.objects.filter(kind="address").delete()
    assert attempt(client, "alice", PASSWORD, "10.0.3.1").status_code == 302


@pytest.mark.parametrize("grant", [None, ("acme:*:*", "admin"), (PLATFORM, "auditor")])
def test_only_platform_admins_reach_the_page_and_a_refusal_writes_nothing(
    client, locked_alice, grant
):
    user = make_operator("someone", [grant] if grant else [])
    login_as(client, user)
    before = AuditEvent.objects.count()
    assert client.get(reverse("lockouts:list")).status_code == 404
    assert client.post(reverse("lockouts:clear", args=[locked_alice.pk])).status_code == 404
    assert LoginThrottle.objects.filter(pk=locked_alice.pk).exists()
    assert AuditEvent.objects.count() == before


def test_anonymous_visitors_are_sent_to_sign_in(client):
    response = client.get(reverse("lockouts:list"))
    assert response.status_code == 302 and response["Location"].startswith("/login/")


def test_clearing_a_gone_lock_says_so_and_writes_nothing(client):
    admin = make_operator("root-admin", [(PLATFORM, "admin")])
    login_as(client, admin)
    response = client.post(reverse("lockouts:clear", args=[999]), follow=True)
    assert "already gone" in response.content.decode()
    assert not events("access.login_unlocked")


def test_the_page_lists_slowed_and_locked_but_not_expired_counters(locked_alice):
    LoginThrottle.objects.create(
        kind="address",
        key="10.9.9.9",
        label="10.9.9.9",
        failures=2,
        first_failure_at=timezone.now(),
        last_failure_at=timezone.now(),
        retry_at=timezone.now() - timedelta(seconds=5),
    )
    keys = {row.key for row in lockouts.current_throttles(system_principal())}
    assert "alice" in keys and "10.0.3.1" in keys and "10.9.9.9" not in keys


def test_the_tokens_page_links_the_lockouts_page_for_platform_admins_only(client):
    login_as(client, make_operator("root-admin", [(PLATFORM, "admin")]))
    assert reverse("lockouts:list") in client.get(reverse("tokens:list")).content.decode()
    login_as(client, make_operator("tenant-admin", [("acme:*:*", "admin")]))
    assert reverse("lockouts:list") not in client.get(reverse("tokens:list")).content.decode()


def test_the_admin_sign_in_page_is_throttled_too(client):
    # Given a staff account whose name has been guessed at through the Django admin
    make_operator("stan", is_staff=True)
    for _ in range(2):
        client.post(
            "/admin/login/", {"username": "stan", "password": "wrong"}, REMOTE_ADDR="10.0.5.1"
        )
    # Then the next attempt there is refused before the password is checked
    response = client.post(
        "/admin/login/", {"username": "stan", "password": PASSWORD}, REMOTE_ADDR="10.0.5.2"
    )
    assert "Too many failed sign-ins" in response.content.decode()
    assert "_auth_user_id" not in client.session
    assert LoginThrottle.objects.get(kind="account").failures == 2


# -- parallel attempts: counted before the password is checked ------------------------


def _burst(
    attempts: list[tuple[str, str, str]], monkeypatch
) -> tuple[list[int], list[tuple[str, str]]]:
    """Send ``(username, password, address)`` sign-ins at once, one thread and connection each.

    Every password check is slowed down, so all attempts are in flight together:
    a throttle that counted only after the check would let all of them through.
    Returns the status codes and the (name, password) pairs that were checked.
    """
    import threading
    import time

    import django.contrib.auth.forms as auth_forms
    from django.db import connection
    from django.test import Client

    checked: list[tuple[str, str]] = []
    real_authenticate = auth_forms.authenticate

    def slow_authenticate(request=None, **credentials):
        checked.append((credentials.get("username", ""), credentials.get("password", "")))
        time.sleep(0.3)
        return real_authenticate(request, **credentials)

    monkeypatch.setattr(auth_forms, "authenticate", slow_authenticate)
    # The first wait is one second, and on a busy machine twelve threads opening their
    # own connections can start further apart than that: a straggler arriving after
    # the wait ran out is rightly admitted. A long wait keeps the burst one burst, so
    # what is measured is the counting, not the machine's speed.
    monkeypatch.setattr(lockouts, "_wait", lambda failures, limits: 300)
    statuses: list[int] = []
    barrier = threading.Barrier(len(attempts))

    def worker(username: str, password: str, address: str) -> None:
        try:
            barrier.wait()
            statuses.append(attempt(Client(), username, password, address).status_code)
        finally:
            connection.close()

    threads = [threading.Thread(target=worker, args=one) for one in attempts]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    assert len(statuses) == len(attempts)
    return statuses, checked


@pytest.mark.django_db(transaction=True)
def test_a_parallel_burst_on_one_account_gets_no_more_than_the_threshold_through(monkeypatch):
    # Given an account (slowed after 2 failures) and 12 wrong guesses sent at once
    # from 12 addresses
    make_operator("alice")
    burst = [("alice", f"wrong-{n}", f"10.7.0.{n}") for n in range(12)]
    # When they all arrive together
    statuses, checked = _burst(burst, monkeypatch)
    # Then only 2 reach the password check; the rest are refused with 429
    assert len(checked) == 2
    assert sorted(statuses) == [200] * 2 + [429] * 10
    # And the counter holds exactly the attempts that were checked, with a wait running
    row = LoginThrottle.objects.get(kind="account")
    assert row.failures == 2 and row.retry_at is not None and row.retry_at > timezone.now()
    assert len(events("access.login_slowed")) == 1


@pytest.mark.django_db(transaction=True)
def test_the_right_password_in_a_parallel_burst_gets_in_only_within_the_threshold(monkeypatch):
    # Given 11 wrong guesses and the right password, sent at once from one address
    make_operator("alice")
    burst = [("alice", f"wrong-{n}", "10.7.1.1") for n in range(11)]
    burst.append(("alice", PASSWORD, "10.7.1.1"))
    # When they all arrive together
    statuses, checked = _burst(burst, monkeypatch)
    # Then at most 2 passwords (the slow-down threshold) are checked in all
    assert len(checked) == 2
    assert statuses.count(429) == 10
    # And the right password signed in only if it was one of those checked
    right_checked = ("alice", PASSWORD) in checked
    assert statuses.count(302) == (1 if right_checked else 0)
    assert statuses.count(200) == (1 if right_checked else 2)
    assert len(LoginThrottle.objects.filter(kind="address")) == 1


@pytest.mark.django_db(transaction=True)
def test_a_parallel_burst_of_names_from_one_address_gets_no_more_than_the_threshold(monkeypatch):
    # Given one address trying 12 made-up names at once
    burst = [(f"guess-{n}", "hunter2", "192.0.2.9") for n in range(12)]
    # When they all arrive together
    statuses, checked = _burst(burst, monkeypatch)
    # Then the address counter lets only 2 through to the password check
    assert len(checked) == 2 and statuses.count(429) == 10
    assert LoginThrottle.objects.get(kind="address").failures == 2
    # And the refused attempts left no counter of their own behind (their increments rolled back)
    assert LoginThrottle.objects.filter(kind="account").count() == 2


def test_an_attempt_is_counted_before_its_password_is_checked():
    # Given an account with no failures
    make_operator("alice")
    # When two attempts are admitted and neither has finished its password check
    first = lockouts.admit(account="alice", address="10.8.0.1")
    second = lockouts.admit(account="Alice", address="10.8.0.2")
    # Then each holds its own place in the streak, and the second's set the wait
    assert [c.failures for c in first.counted if c.kind == "account"] == [1]
    assert [c.failures for c in second.counted if c.kind == "account"] == [2]
    # And a third is refused at once, counting nothing on either counter
    with pytest.raises(lockouts.LoginThrottled):
        lockouts.admit(account="alice", address="10.8.0.3")
    assert LoginThrottle.objects.get(kind="account").failures == 2
    assert not LoginThrottle.objects.filter(kind="address", key="10.8.0.3").exists()
    # And no audit event is written until a password is known to be wrong
    assert not events("access.login_slowed")
    lockouts.record_failure(second)
    assert len(events("access.login_slowed")) == 1


def test_a_success_takes_its_count_back_and_the_wait_it_set():
    # Given one failure on an address, then the right password from it (its count is 2 while checked)
    make_operator("carol")
    lockouts.record_failure(lockouts.admit(account="carol", address="10.8.1.1"))
    admitted = lockouts.admit(account="carol", address="10.8.1.1")
    row = LoginThrottle.objects.get(kind="address")
    assert row.failures == 2 and row.retry_at is not None
    # When the password proves right
    lockouts.record_success(admitted)
    # Then the account's streak is over and the address is back to its one failure, no wait
    assert not LoginThrottle.objects.filter(kind="account").exists()
    row.refresh_from_db()
    assert row.failures == 1 and row.retry_at is None and row.locked_at is None
    assert not events("access.login_slowed") and not events("access.login_locked")


def test_an_attempt_whose_check_never_finishes_stays_counted():
    # Given an attempt admitted whose password check crashed (no failure, no success reported)
    make_operator("dave")
    lockouts.admit(account="dave", address="10.8.2.1")
    # Then it still counts: a crash cannot be used to guess for free
    assert LoginThrottle.objects.get(kind="account").failures == 1
