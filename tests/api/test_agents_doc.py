"""docs/agents.md: the Python client example runs against a live server, as written."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from memory.models import Record
from tests.api.conftest import issue_token

DOC = Path(__file__).resolve().parents[2] / "docs" / "agents.md"


def client_example() -> str:
    [block] = re.findall(r"```python title=client\.py\n(.*?)```", DOC.read_text(), re.DOTALL)
    return block


def test_the_doc_has_http_and_mcp_sections():
    text = DOC.read_text()
    for fragment in (
        "/api/v1/openapi.json",
        'curl -s -H "$AUTH" -H "$JSON" $AETNAWEB/memory/remember',
        "$AETNAWEB/memory/recall-block",
        "$AETNAWEB/memory/forget/preview",
        "$AETNAWEB/memory/propose",
        "$AETNAWEB/memory/log-action",
        "$AETNAWEB/memory/persona",
        "$AETNAWEB/memory/scenes",
        "$AETNAWEB/actions/stage",
        "$AETNAWEB/audit/checkpoint",
        '{"mcpServers": {"aetnaweb": {"command": "aetnaweb", "args": ["mcp", "--scope", ',
    ):
        assert fragment in text, fragment


@pytest.mark.django_db(transaction=True)
def test_the_python_client_runs_against_a_live_server(live_server, monkeypatch, capsys):
    # Given a live server and a token for alice's subtree, in the example's environment
    monkeypatch.setenv("AETNAWEB_URL", live_server.url)
    monkeypatch.setenv("AETNAWEB_TOKEN", issue_token("acme:alice:*"))
    # When the documented example runs
    exec(compile(client_example(), str(DOC), "exec"), {"__name__": "client"})  # noqa: S102
    # Then it remembered, recalled, forgot with a receipt and showed a refusal
    out = capsys.readouterr().out
    assert "<relevant_memories>" in out
    assert "aetnamem-deletion-receipt-v1" in out
    assert "400 invalid_scope [scope]: invalid scope 'acme:alice'" in out
    assert Record.objects.get(scope="acme:alice:proj").status == "tombstoned"
