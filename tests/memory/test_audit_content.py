"""No message, fact value, query or selector text anywhere in the audit table (audit-log-v1
"What payloads may contain"): every verb runs, then the whole table is scanned."""

from __future__ import annotations

import pytest
from django.db import connection

from aetnaweb.access import SYSTEM
from audit.verification import verify_all
from memory import services

S = "acme:alice:proj"
# Distinctive strings that must never reach audit_log, in any column.
SECRETS = [
    "Quokkamail",  # a fact value
    "Marmoset Lane",  # another value
    "hummingbird sonata",  # message text without a fact
    "Pangolin",  # value from a webpage
    "zanzibarian",  # recall query text
    "Wombatbank",  # explicit value
    "capybara",  # assistant / tool turn content
    "narwhal",  # a proposal's content
    "axolotl reason",  # review reasons
    "ocelot",  # a selector
    "tapir",  # an utterance's needle
]


@pytest.mark.django_db
def test_no_content_ever_enters_the_audit_table():
    # Given every verb exercised with distinctive content
    first = services.remember(
        principal=SYSTEM, scope=S, text="My backup email is x@Quokkamail.example.", session_id="s1"
    )
    services.remember(principal=SYSTEM, scope=S, text="My street is Marmoset Lane.")
    services.remember(
        principal=SYSTEM, scope=S, text="I hummed a hummingbird sonata today.", force=True
    )
    services.remember(principal=SYSTEM, scope=S, text="I hummed a hummingbird sonata today.")
    page = services.remember(
        principal=SYSTEM, scope=S, text="<webpage>My favourite animal is Pangolin.</webpage>"
    )
    services.remember(
        principal=SYSTEM,
        scope=S,
        text="<tool_output>Remember that the capybara sleeps.</tool_output>",
    )
    services.remember_fact(principal=SYSTEM, scope=S, key="bank", value="Wombatbank")
    services.recall(principal=SYSTEM, scope=S, query="zanzibarian backup email")
    services.recall_block(
        principal=SYSTEM, scope=S, query="zanzibarian backup email", min_score=0.0
    )
    services.persona(principal=SYSTEM, scope=S)
    services.capture(principal=SYSTEM, scope=S, role="assistant", content="capybara says hi")
    services.capture(principal=SYSTEM, scope=S, role="tool_result", content="capybara result")
    services.propose_facts(
        principal=SYSTEM,
        scope=S,
        facts=[{"content": "User likes narwhal.", "evidence": [first.episode_id]}],
    )
    services.propose_facts(
        principal=SYSTEM, scope=S, facts=[{"content": "narwhal without evidence"}]
    )
    services.promote(
        principal=SYSTEM, scope=S, record_id=page.record_ids[0], reason="axolotl reason"
    )
    tool = services.remember(
        principal=SYSTEM, scope=S, text="<webpage>My pet is an ocelot.</webpage>"
    )
    services.reject(
        principal=SYSTEM, scope=S, record_id=tool.record_ids[0], reason="axolotl reason"
    )
    services.remember(principal=SYSTEM, scope=S, text="My pet is an ocelot and a tapir.")
    services.forget_preview(principal=SYSTEM, scope=S, selector="ocelot")
    services.forget(principal=SYSTEM, scope=S, selector="ocelot")
    services.remember(principal=SYSTEM, scope=S, text="My other pet is a tapir.")
    services.forget(principal=SYSTEM, scope=S, utterance="forget my tapir")
    with pytest.raises(Exception):
        services.forget(principal=SYSTEM, scope=S, utterance="forget")
    services.consolidate(principal=SYSTEM, scope=S)
    services.log_action(principal=SYSTEM, scope=S, event_type="agent.note", payload={"size": 3})
    # When the whole audit table is read, every column of every row
    with connection.cursor() as cursor:
        cursor.execute("SELECT * FROM audit_log")
        rows = cursor.fetchall()
    assert len(rows) > 30
    haystack = "\n".join(
        " ".join("" if value is None else str(value) for value in row) for row in rows
    ).lower()
    # Then none of the content is there
    leaked = [secret for secret in SECRETS if secret.lower() in haystack]
    assert leaked == []
    # And neither are the fact slot names: a slot ("bank pin") says what a forgotten
    # value was, so the chain commits a salted digest of it (issue 29 item 4)
    assert "backup email" not in haystack
    # And every chain still verifies
    assert verify_all(principal=SYSTEM).ok
