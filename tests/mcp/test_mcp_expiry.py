"""The MCP remember tools take expires_at (issue 32 item 3), in process."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from mcp.server.mcpserver.exceptions import ToolError

from audit.models import AuditEvent
from memory.models import Record
from tests.mcp.test_mcp_import_conversation import call
from tests.memory.conftest import clean_index  # noqa: F401  (a fixture: empties the indexes)


@pytest.mark.django_db(transaction=True)
@pytest.mark.usefixtures("clean_index")
def test_remember_and_remember_fact_take_expires_at():
    call("remember", {"text": "My car is red.", "expires_at": "2999-03-02T09:30:00Z"})
    call("remember_fact", {"key": "door code", "value": "4711", "expires_at": "2999-01-01T00:00Z"})
    assert sorted(Record.objects.values_list("expires_at", flat=True)) == [
        datetime(2999, 1, 1, tzinfo=UTC),
        datetime(2999, 3, 2, 9, 30, tzinfo=UTC),
    ]


@pytest.mark.django_db(transaction=True)
@pytest.mark.usefixtures("clean_index")
def test_an_expiry_in_the_past_is_a_tool_error_and_stores_nothing():
    for tool, arguments in (
        ("remember", {"text": "My car is red.", "expires_at": "2001-01-01T00:00Z"}),
        ("remember_fact", {"key": "k", "value": "v", "expires_at": "2999-01-01T00:00"}),
    ):
        with pytest.raises(ToolError, match="expires_at"):
            call(tool, arguments)
    assert not Record.objects.exists() and not AuditEvent.objects.exists()
