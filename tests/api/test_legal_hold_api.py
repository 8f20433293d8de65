"""Legal holds over the API (issue 32, item 4): set, list, the refusal a held forget gets, lift."""

from __future__ import annotations

import pytest

from tests.memory.test_erase_subject import APOLLO, DANA, seed
from tests.memory.test_legal_hold import MATTER

pytestmark = pytest.mark.django_db


def test_the_api_sets_lists_and_lifts(make_api):
    seed()
    api = make_api(DANA)
    made = api.post("/memory/legal-holds", {"scope": DANA, "reference": MATTER})
    assert made.status_code == 201, made.data
    listed = api.get("/memory/legal-holds", {"scope": APOLLO})
    assert [h["hold_id"] for h in listed.data["holds"]] == [made.data["hold_id"]]
    refused = api.post("/memory/forget", {"scope": DANA, "selector": "backup email"})
    assert refused.status_code == 409 and refused.data["error"] == "legal_hold"
    assert MATTER in refused.data["detail"]
    lifted = api.post("/memory/legal-holds/lift", {"scope": DANA})
    assert lifted.status_code == 200 and lifted.data["lifted_at"]
    weak = make_api(DANA, ["read", "write", "forget"])
    assert weak.post("/memory/legal-holds", {"scope": DANA, "reference": MATTER}).status_code == 404
