"""docs/agents.md: the quickstart runs against a live server holding the demo data, as written."""

from __future__ import annotations

import re
import shlex
from io import StringIO
from pathlib import Path

import pytest
from django.core.management import call_command

from memory.models import Record

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


def token_command() -> list[str]:
    """The quickstart's `manage.py access token create ...` line, as arguments."""
    command, *_ = re.findall(
        r"manage\.py (access token create .*?--owner \w+)", DOC.read_text(), re.DOTALL
    )
    return shlex.split(command.replace("\\\n", " "))


@pytest.mark.django_db(transaction=True)
def test_the_quickstart_runs_as_written_on_a_make_run_database(
    live_server, monkeypatch, capsys, tmp_path, settings
):
    # Given what `make run` seeds, and a token made with the documented command
    settings.AETNAWEB_DATA_DIR = tmp_path
    call_command("demo")
    out = StringIO()
    call_command(*token_command(), stdout=out)
    [secret] = re.findall(r"aetna_[A-Za-z0-9_-]+", out.getvalue())
    monkeypatch.setenv("AETNAWEB_URL", live_server.url)
    monkeypatch.setenv("AETNAWEB_TOKEN", secret)
    capsys.readouterr()
    # When the documented client example runs
    exec(compile(client_example(), str(DOC), "exec"), {"__name__": "client"})  # noqa: S102
    # Then it remembered, recalled, forgot with a receipt and showed a refusal
    printed = capsys.readouterr().out
    assert "User's backup email is dana@example.org." in printed
    assert "<relevant_memories>" in printed
    assert "aetnamem-deletion-receipt-v1" in printed
    assert "invalid_scope scope" in printed
    assert Record.objects.get(scope="acme:dana:quickstart").status == "tombstoned"
