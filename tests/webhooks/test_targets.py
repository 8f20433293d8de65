"""SSRF: which URLs and addresses a webhook may reach, at registration and at delivery."""

from __future__ import annotations

import pytest

from aetnaweb.access import SYSTEM
from aetnaweb.text import UnstorableText
from audit.models import AuditEvent
from tests.webhooks.conftest import register
from webhooks import services, targets
from webhooks.models import WebhookDelivery, WebhookEndpoint

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize(
    ("url", "reason"),
    [
        ("https://127.0.0.1/hook", "loopback"),
        ("https://[::1]/hook", "loopback"),
        ("https://[::ffff:127.0.0.1]/hook", "loopback"),
        ("https://10.0.0.5/hook", "not a public address"),
        ("https://192.168.1.10/hook", "not a public address"),
        ("https://172.16.0.1/hook", "not a public address"),
        ("https://169.254.169.254/latest/meta-data", "not a public address"),
        ("https://100.64.0.1/hook", "not a public address"),
        ("https://0.0.0.0/hook", "not a public address"),
        ("https://[fd00::1]/hook", "not a public address"),
        ("https://[fe80::1]/hook", "not a public address"),
        ("https://224.0.0.1/hook", "not a public address"),
        ("ftp://hooks.example.com/", "https://"),
        ("http://hooks.example.com/", "must use https://"),
        ("http://127.0.0.1/", "must use https://"),
        ("https://user:pw@hooks.example.com/", "user name or password"),
        ("https://hooks.example.com/a b", "spaces"),
        ("https://hooks.example.com/\x7f", "control characters"),
        ("https://hooks.example.com/\t", "control characters"),
        ("https://hóoks.example.com/", "non-ASCII"),
        ("https:///nohost", "no host"),
        ("https://hooks.example.com:99999/", "does not parse"),
    ],
)
def test_registration_refuses_unsafe_urls_and_writes_nothing(settings, url, reason):
    # Given loopback is not allowed (production default)
    settings.AETNAWEB_WEBHOOKS_ALLOW_HTTP = False
    # When an endpoint is registered for the URL
    with pytest.raises(services.WebhookError, match=reason) as refused:
        register(url)
    # Then it is refused, naming the field, and nothing is written
    assert refused.value.field == "url"
    assert not WebhookEndpoint.objects.exists()
    assert not AuditEvent.objects.filter(event_type__startswith="webhook.").exists()


def test_nul_and_lone_surrogates_are_refused_before_any_check():
    for url in ("https://hooks.example.com/\x00", "https://hooks.example.com/\ud800"):
        with pytest.raises(UnstorableText) as refused:
            register(url)
        assert refused.value.field == "url"
    assert not WebhookEndpoint.objects.exists()


def test_http_is_allowed_only_for_loopback_and_only_with_the_setting(settings):
    settings.AETNAWEB_WEBHOOKS_ALLOW_HTTP = True
    assert targets.parse_target("http://127.0.0.1:8123/x?y=1").path == "/x?y=1"
    with pytest.raises(targets.TargetRefused, match="loopback host"):
        targets.parse_target("http://hooks.example.com/")
    with pytest.raises(targets.TargetRefused, match="not a public address"):
        targets.check_address("10.1.2.3")  # the setting opens loopback only
    settings.AETNAWEB_WEBHOOKS_ALLOW_HTTP = False
    with pytest.raises(targets.TargetRefused, match="https://"):
        targets.parse_target("http://127.0.0.1:8123/x")


def test_a_name_resolving_to_a_private_address_is_refused_at_registration(monkeypatch):
    monkeypatch.setattr(targets, "resolve", lambda host, port: ["93.184.215.14", "10.0.0.7"])
    with pytest.raises(services.WebhookError, match=r"10\.0\.0\.7"):
        register("https://hooks.example.com/aetnaweb")
    assert not WebhookEndpoint.objects.exists()


def test_delivery_resolves_again_and_refuses_a_rebound_name(monkeypatch, settings):
    # Given an endpoint whose name resolved to a public address at registration
    settings.AETNAWEB_WEBHOOKS_ALLOW_HTTP = False
    monkeypatch.setattr(targets, "resolve", lambda host, port: ["93.184.215.14"])
    endpoint, _ = register("https://hooks.example.com/aetnaweb")
    # When the name later answers with the metadata address (DNS rebinding)
    monkeypatch.setattr(targets, "resolve", lambda host, port: ["169.254.169.254"])
    connections = []
    monkeypatch.setattr("webhooks.sender.post", lambda *args, **kwargs: connections.append(args))
    delivery = services.send_test_event(principal=SYSTEM, endpoint_id=endpoint.id)
    done = services.deliver(delivery.id)
    # Then the attempt is refused before any connection, and recorded as a failed attempt
    assert connections == []
    assert done is not None and done.status == WebhookDelivery.Status.PENDING
    assert done.attempts == 1 and "169.254.169.254" in done.last_error
    assert done.last_status_code is None


def test_a_name_that_does_not_resolve_yet_is_accepted_and_checked_at_delivery(monkeypatch):
    def no_dns(host, port):
        raise targets.TargetRefused(f"{host} does not resolve")

    monkeypatch.setattr(targets, "resolve", no_dns)
    endpoint, _ = register("https://not-yet.example.com/hook")
    delivery = services.send_test_event(principal=SYSTEM, endpoint_id=endpoint.id)
    done = services.deliver(delivery.id)
    assert done is not None and "does not resolve" in done.last_error


# -- IPv6 forms that carry an IPv4 address, and ports ------------------------------------


@pytest.mark.parametrize(
    ("url", "reason"),
    [
        # 6to4 embedding the metadata service, loopback and a private address
        ("https://[2002:a9fe:a9fe::]/", r"embeds 169\.254\.169\.254\) is not a public address"),
        ("https://[2002:7f00:1::]/", r"embeds 127\.0\.0\.1\) is a loopback address"),
        ("https://[2002:a00:1::]/hook", r"embeds 10\.0\.0\.1\) is not a public address"),
        # Teredo, whatever it embeds
        ("https://[2001:0:4136:e378:8000:63bf:3fff:fdd2]/", "Teredo"),
        ("https://[2001::1]/", "Teredo"),
        # NAT64 with a private or metadata IPv4 inside; the local-use prefix outright
        ("https://[64:ff9b::a00:1]/", r"embeds 10\.0\.0\.1\) is not a public address"),
        ("https://[64:ff9b::a9fe:a9fe]/", r"embeds 169\.254\.169\.254\)"),
        ("https://[64:ff9b:1::808:808]/", "local-use NAT64"),
        # IPv4-mapped, even of a public address; IPv4-compatible
        ("https://[::ffff:8.8.8.8]/", "give the IPv4 address itself"),
        ("https://[::ffff:169.254.169.254]/", "not a public address"),
        ("https://[::8.8.8.8]/", "IPv4-compatible"),
        # ports other than 443
        ("https://hooks.example.com:8443/", "port 8443 is not allowed"),
        ("https://hooks.example.com:22/", "port 22 is not allowed"),
        ("https://93.184.215.14:6379/", "port 6379 is not allowed"),
        ("https://hooks.example.com:80/", "port 80 is not allowed"),
    ],
)
def test_registration_refuses_embedded_private_addresses_and_odd_ports(settings, url, reason):
    # Given the production defaults (no loopback, no extra ports)
    settings.AETNAWEB_WEBHOOKS_ALLOW_HTTP = False
    settings.AETNAWEB_WEBHOOKS_ALLOWED_PORTS = []
    # When an endpoint is registered for the URL
    with pytest.raises(services.WebhookError, match=reason) as refused:
        register(url)
    # Then it is refused, naming the field, and nothing is written
    assert refused.value.field == "url"
    assert not WebhookEndpoint.objects.exists()
    assert not AuditEvent.objects.filter(event_type__startswith="webhook.").exists()


@pytest.mark.parametrize(
    "address",
    ["2002:808:808::1", "64:ff9b::808:808", "2606:4700::1111", "93.184.215.14"],
)
def test_embedding_forms_of_public_addresses_and_plain_public_ones_pass(settings, address):
    settings.AETNAWEB_WEBHOOKS_ALLOW_HTTP = False
    assert str(targets.check_address(address)) == address


def test_the_development_setting_opens_plain_loopback_only_not_embedded_loopback(settings):
    settings.AETNAWEB_WEBHOOKS_ALLOW_HTTP = True
    assert str(targets.check_address("127.0.0.1")) == "127.0.0.1"
    for embedded in ("2002:7f00:1::", "::ffff:127.0.0.1", "64:ff9b::7f00:1"):
        with pytest.raises(targets.TargetRefused, match="loopback"):
            targets.check_address(embedded)


def test_a_listed_port_is_allowed_and_an_unlisted_one_still_refused(settings, monkeypatch):
    # Given the operator allows port 8443
    settings.AETNAWEB_WEBHOOKS_ALLOW_HTTP = False
    settings.AETNAWEB_WEBHOOKS_ALLOWED_PORTS = [8443]
    monkeypatch.setattr(targets, "resolve", lambda host, port: ["93.184.215.14"])
    # Then a URL on 8443 registers, and the default port still works
    endpoint, _ = register("https://hooks.example.com:8443/aetnaweb")
    assert targets.parse_target(endpoint.url).port == 8443
    assert targets.parse_target("https://hooks.example.com/").port == 443
    # And another port is still refused
    with pytest.raises(targets.TargetRefused, match="port 9443 is not allowed"):
        targets.parse_target("https://hooks.example.com:9443/")


def test_delivery_refuses_a_name_that_now_resolves_to_an_embedded_metadata_address(
    monkeypatch, settings
):
    # Given an endpoint whose name resolved to a public address at registration
    settings.AETNAWEB_WEBHOOKS_ALLOW_HTTP = False
    monkeypatch.setattr(targets, "resolve", lambda host, port: ["93.184.215.14"])
    endpoint, _ = register("https://hooks.example.com/aetnaweb")
    # When the name later answers with a 6to4 address embedding 169.254.169.254
    monkeypatch.setattr(targets, "resolve", lambda host, port: ["2002:a9fe:a9fe::"])
    connections = []
    monkeypatch.setattr("webhooks.sender.post", lambda *args, **kwargs: connections.append(args))
    delivery = services.send_test_event(principal=SYSTEM, endpoint_id=endpoint.id)
    done = services.deliver(delivery.id)
    # Then the attempt is refused before any connection is made
    assert connections == []
    assert done is not None and done.attempts == 1
    assert "169.254.169.254" in done.last_error


def test_delivery_refuses_an_endpoint_whose_port_is_no_longer_allowed(monkeypatch, settings):
    # Given an endpoint registered on a port the operator then removes from the list
    settings.AETNAWEB_WEBHOOKS_ALLOW_HTTP = False
    settings.AETNAWEB_WEBHOOKS_ALLOWED_PORTS = [8443]
    monkeypatch.setattr(targets, "resolve", lambda host, port: ["93.184.215.14"])
    endpoint, _ = register("https://hooks.example.com:8443/aetnaweb")
    settings.AETNAWEB_WEBHOOKS_ALLOWED_PORTS = []
    connections = []
    monkeypatch.setattr("webhooks.sender.post", lambda *args, **kwargs: connections.append(args))
    # When a delivery is attempted
    done = services.deliver(services.send_test_event(principal=SYSTEM, endpoint_id=endpoint.id).id)
    # Then nothing is sent
    assert connections == [] and done is not None and "port 8443" in done.last_error
