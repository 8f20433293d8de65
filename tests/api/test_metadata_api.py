"""Record metadata over HTTP: stored by remember (single and batch) and PATCH, returned on
every record, typed filters on GET /memory/records and recall, limits at n and n+1."""

from __future__ import annotations

import json
from urllib.parse import quote

import pytest

from audit.models import AuditEvent
from memory.limits import MAX_METADATA_BYTES, MAX_METADATA_FILTER_KEYS, MAX_METADATA_KEYS
from memory.models import Record

S = "acme:alice:proj"
pytestmark = pytest.mark.django_db


def counts() -> tuple[int, int]:
    return Record.objects.count(), AuditEvent.objects.count()


def remember(api, text: str, metadata=None, scope: str = S):
    body = {"scope": scope, "text": text, "force": True}
    if metadata is not None:
        body["metadata"] = metadata
    response = api.post("/memory/remember", body)
    assert response.status_code == 201, response.data
    return response.data["records"][0]["record_id"]


def listed(api, query: str, scope: str = S):
    response = api.client.get(
        f"/api/v1/memory/records?scope={quote(scope)}&{query}", headers=api._headers(None)
    )
    response.data = response.json()
    return response


def sized(size: int) -> dict[str, str]:
    overhead = len(json.dumps({"k": ""}, separators=(",", ":")))
    return {"k": "x" * (size - overhead)}


def test_remember_returns_metadata_and_the_record_endpoints_show_it(alice_api):
    # Given a message remembered with metadata
    response = alice_api.post(
        "/memory/remember",
        {"scope": S, "text": "My editor is helix.", "metadata": {"customer_id": 42, "vip": True}},
    )
    # Then the answer, the list and the record page carry it, types intact
    assert response.status_code == 201, response.data
    record = response.data["records"][0]
    assert record["metadata"] == {"customer_id": 42, "vip": True}
    shown = alice_api.get(f"/memory/records/{record['record_id']}")
    assert shown.data["record"]["metadata"] == {"customer_id": 42, "vip": True}
    items = listed(alice_api, "").data["items"]
    assert items[0]["metadata"] == {"customer_id": 42, "vip": True}


def test_key_value_facts_take_metadata_too(alice_api):
    response = alice_api.post(
        "/memory/remember",
        {"scope": S, "key": "shell", "value": "fish", "metadata": {"team": "ops"}},
    )
    assert response.status_code == 201
    assert response.data["records"][0]["metadata"] == {"team": "ops"}


def test_list_filter_is_typed_and_anded(alice_api):
    number = remember(alice_api, "My editor is helix.", {"customer_id": 42, "channel": "email"})
    text = remember(alice_api, "My shell is fish.", {"customer_id": "42", "channel": "email"})
    remember(alice_api, "My tea is green.")

    def ids(query: str) -> set[str]:
        response = listed(alice_api, query)
        assert response.status_code == 200, response.data
        return {item["record_id"] for item in response.data["items"]}

    assert ids("metadata.customer_id=42") == {number}
    assert ids("metadata.customer_id=" + quote('"42"')) == {text}
    assert ids("metadata.channel=" + quote('"email"')) == {number, text}
    assert ids("metadata.channel=" + quote('"email"') + "&metadata.customer_id=42") == {number}


@pytest.mark.parametrize(
    ("query", "field"),
    [
        ("metadata.name=alice", "metadata.name"),
        ("metadata.Name=1", "metadata"),
        ("metadata.a=1&metadata.a=2", "metadata.a"),
        ("metadata.a=" + quote("{}"), "metadata.a"),
        ("metadata.a=NaN", "metadata.a"),
    ],
)
def test_a_bad_list_filter_is_a_400_naming_the_field(alice_api, query, field):
    response = listed(alice_api, query)
    assert response.status_code == 400
    assert response.data["error"] == "metadata_error"
    assert response.data["field"] == field


def test_recall_filters_in_the_body_and_never_crosses_scopes(alice_api, make_api):
    # Given alice and a sibling (bob) hold the same words and the same metadata
    bob_api = make_api("acme:bob:*")
    mine = remember(alice_api, "I reviewed the launch codename plan orion.", {"customer_id": 42})
    remember(alice_api, "I reviewed the launch codename plan vega.", {"customer_id": 7})
    remember(
        bob_api, "I reviewed the launch codename plan orion.", {"customer_id": 42}, "acme:bob:x"
    )
    # When alice recalls with a metadata filter
    response = alice_api.post(
        "/memory/recall",
        {"scope": S, "query": "launch codename", "filters": {"metadata": {"customer_id": 42}}},
    )
    # Then only her matching record is considered and returned, with its metadata
    assert response.status_code == 200, response.data
    assert [c["record_id"] for c in response.data["candidates"]] == [mine]
    assert response.data["candidates"][0]["metadata"] == {"customer_id": 42}
    # And the string "42" matches nothing
    response = alice_api.post(
        "/memory/recall",
        {"scope": S, "query": "launch codename", "filters": {"metadata": {"customer_id": "42"}}},
    )
    assert response.data["candidates"] == []
    # And recall-block takes the same filter
    block = alice_api.post(
        "/memory/recall-block",
        {
            "scope": S,
            "query": "launch codename orion",
            "min_score": 0,
            "filters": {"metadata": {"customer_id": 42}},
        },
    )
    assert block.status_code == 200, block.data
    assert block.data["record_ids"] == [mine]


def test_recall_filter_limits(alice_api):
    at = {f"k{i}": i for i in range(MAX_METADATA_FILTER_KEYS)}
    body = {"scope": S, "query": "x", "filters": {"metadata": at}}
    assert alice_api.post("/memory/recall", body).status_code == 200
    body["filters"]["metadata"] = {**at, "one_more": 1}
    response = alice_api.post("/memory/recall", body)
    assert response.status_code == 400
    assert response.data["field"].startswith("filters.metadata")


def test_limits_at_the_limit_and_one_past_through_the_api(alice_api):
    at_keys = {f"k{i}": i for i in range(MAX_METADATA_KEYS)}
    assert remember(alice_api, "My editor is helix.", at_keys)
    assert remember(alice_api, "My shell is fish.", sized(MAX_METADATA_BYTES))
    for too_much, field in (
        ({**at_keys, "one_more": 1}, "metadata"),
        (sized(MAX_METADATA_BYTES + 1), "metadata"),
        ({"x": {"nested": 1}}, "metadata.x"),
        ({"Upper": 1}, "metadata"),
        ({"x": "a\u0000b"}, "metadata.x"),
        ({"x": 2**53}, "metadata.x"),
    ):
        before = counts()
        response = alice_api.post(
            "/memory/remember", {"scope": S, "text": "My car is red.", "metadata": too_much}
        )
        assert response.status_code == 400, (too_much, response.data)
        assert response.data["field"] == field, response.data
        assert counts() == before


def test_nan_and_lone_surrogates_in_raw_json_are_refused(alice_api):
    before = counts()
    prefix = '{"scope": "' + S + '", "text": "My car is red.", "metadata": '
    for raw in (
        prefix + '{"x": NaN}}',
        prefix + '{"x": "\\ud800"}}',
        prefix + '{"\\ud800": 1}}',
    ):
        response = alice_api.post("/memory/remember", raw=raw)
        assert response.status_code == 400, (raw, response.data)
    assert counts() == before


def test_batch_items_take_metadata_and_a_bad_one_names_its_item(alice_api):
    url = "/memory/remember/batch"
    ok = alice_api.post(
        url,
        {
            "scope": S,
            "items": [
                {"text": "My editor is helix.", "metadata": {"n": 1}},
                {"key": "shell", "value": "fish", "metadata": {"n": 2}},
            ],
        },
    )
    assert ok.status_code == 201, ok.data
    assert [r["records"][0]["metadata"] for r in ok.data["results"]] == [{"n": 1}, {"n": 2}]
    before = counts()
    bad = alice_api.post(
        url,
        {
            "scope": S,
            "items": [
                {"text": "My car is red.", "metadata": {"n": 1}},
                {"text": "My desk is oak.", "metadata": {"Bad": 1}},
            ],
        },
    )
    assert bad.status_code == 400
    assert bad.data["field"] == "items.1.metadata"
    assert counts() == before


def _patch(api, record_id: str, body: dict):
    response = api.client.patch(
        f"/api/v1/memory/records/{record_id}",
        data=json.dumps(body),
        content_type="application/json",
        headers=api._headers(None),
    )
    response.data = response.json()
    return response


def test_patch_carries_or_replaces_metadata_and_history_keeps_each(alice_api):
    old = remember(alice_api, "My backup email is a@example.org.", {"customer_id": 42})
    carried = _patch(alice_api, old, {"content": "User's backup email is b@example.org"})
    assert carried.status_code == 200, carried.data
    assert carried.data["record"]["metadata"] == {"customer_id": 42}
    newest = _patch(
        alice_api,
        carried.data["record"]["record_id"],
        {"content": "User's backup email is c@example.org", "metadata": {"customer_id": 7}},
    )
    assert newest.data["record"]["metadata"] == {"customer_id": 7}
    history = alice_api.get(f"/memory/records/{newest.data['record']['record_id']}/history")
    assert [r["metadata"] for r in history.data["lineage"]] == [
        {"customer_id": 42},
        {"customer_id": 42},
        {"customer_id": 7},
    ]
    before = counts()
    bad = _patch(
        alice_api,
        newest.data["record"]["record_id"],
        {"content": "User's backup email is d@example.org", "metadata": {"BAD": 1}},
    )
    assert bad.status_code == 400 and bad.data["field"] == "metadata"
    assert counts() == before


def test_forget_leaves_no_metadata_in_any_answer(alice_api):
    record_id = remember(alice_api, "My backup email is a@example.org.", {"email": "a@example.org"})
    response = alice_api.post("/memory/forget", {"scope": S, "record_ids": [record_id]})
    assert response.status_code == 200, response.data
    shown = alice_api.get(f"/memory/records/{record_id}")
    assert shown.data["record"]["metadata"] == {}
    assert listed(alice_api, "metadata.email=" + quote('"a@example.org"')).data["items"] == []
    assert "a@example.org" not in json.dumps(listed(alice_api, "").data)


def test_the_openapi_document_describes_metadata(alice_api, client):
    document = client.get("/api/v1/openapi.json").json()
    schemas = document["components"]["schemas"]
    assert "metadata" in schemas["RememberIn"]["properties"]
    assert "filters" in schemas["RecallIn"]["properties"]
    assert "metadata" in schemas["RecordOut"]["properties"]
    operation = document["paths"]["/api/v1/memory/records"]["get"]
    parameters = {p["name"]: p for p in operation["parameters"]}
    # metadata.<key> is one deepObject parameter (metadata[key]=...), filters its JSON form
    assert parameters["metadata"]["style"] == "deepObject"
    assert "metadata.customer_id=42" in parameters["metadata"]["description"]
    assert parameters["created_at"]["style"] == "deepObject"
    assert "filters" in parameters


def test_capture_of_a_user_turn_stores_metadata_and_checks_it_for_every_role(alice_api):
    response = alice_api.post(
        "/memory/capture",
        {"scope": S, "role": "user", "content": "My shell is fish.", "metadata": {"n": 1}},
    )
    assert response.status_code == 200, response.data
    assert response.data["remembered"]["records"][0]["metadata"] == {"n": 1}
    before = counts()
    bad = alice_api.post(
        "/memory/capture",
        {"scope": S, "role": "assistant", "content": "ok", "metadata": {"n": [1]}},
    )
    assert bad.status_code == 400 and bad.data["field"] == "metadata.n"
    assert counts() == before


# -- bad input never gives a 500 ----------------------------------------------------------

DEEP = 1500
NASTY_FILTER_VALUES = [
    "[" * DEEP + "]" * DEEP,  # the reported crash: RecursionError in the JSON parser
    "[" * DEEP,
    " \t[" * DEEP,
    '{"a":' * DEEP + "1" + "}" * DEEP,
    '{"a":' * DEEP,
    "[[[1]]]",
    "9" * 5000,  # past Python's integer-string limit
    "9" * 4000,  # parses, but far past 2^53
    str(2**53),
    "-" + "9" * 400,
    "1e999",
    "-1e999",
    "1e-999",
    "0." + "0" * 3000 + "1",
    "Infinity",
    "-Infinity",
    '"\\ud800"',  # a lone surrogate, escaped in JSON
    '"\\u0000"',
    '"' + "\u202e\u0301\ufeff\U0001f600" * 50 + '"',
    '"' + "x" * 100_000 + '"',
    '"unterminated',
    "\u0661\u0662",  # Arabic-Indic digits: not JSON numbers
    "\uff14\uff12",  # fullwidth 42
    "true false",
    "nul\u006c",
]


@pytest.mark.parametrize("value", NASTY_FILTER_VALUES, ids=range(len(NASTY_FILTER_VALUES)))
def test_a_hostile_list_filter_value_is_a_400_or_a_match_never_a_500(alice_api, value):
    # Given a stored record with metadata
    remember(alice_api, "My editor is helix.", {"customer_id": 42})
    before = counts()
    # When the list is filtered with a hostile value
    response = listed(alice_api, "metadata.customer_id=" + quote(value))
    # Then the answer is a JSON 200 or a 400 naming the filter, and nothing was written
    assert response.status_code in (200, 400), response.status_code
    if response.status_code == 400:
        assert response.data["error"] == "metadata_error"
        assert response.data["field"].endswith("metadata.customer_id")
    assert counts() == before


def test_a_filter_nested_1500_deep_is_a_400_saying_flat(alice_api):
    response = listed(alice_api, "metadata.k=" + quote("[" * DEEP + "]" * DEEP))
    assert response.status_code == 400
    assert response.data["field"] == "metadata.k"  # the query parameter, as sent
    assert "metadata is flat" in response.data["detail"]


NASTY_KEYS = ["\ud800", "\x00", "k" * 5000, "\u202e", "a" + "[" * DEEP, "", ".", "\U0001f600"]


@pytest.mark.parametrize("key", NASTY_KEYS, ids=range(len(NASTY_KEYS)))
def test_a_hostile_list_filter_key_is_a_400_never_a_500(alice_api, key):
    response = listed(alice_api, quote("metadata." + key, errors="surrogatepass") + "=1")
    # (a NUL is refused by the API's input guard before the filter parser sees it)
    assert response.status_code == 400
    assert response.data["error"] in ("metadata_error", "invalid_field")


@pytest.mark.parametrize(
    "filters",
    [
        {"metadata": {"k": json.loads("[" * 900 + "]" * 900)}},
        {"metadata": {"k": 10**400}},
        {"metadata": {"k": 1e308 * 10}},
    ],
    ids=["deep", "huge-int", "infinity"],
)
def test_a_hostile_recall_filter_in_the_body_is_a_400_never_a_500(alice_api, filters):
    raw = json.dumps({"scope": S, "query": "editor", "filters": filters})
    response = alice_api.post("/memory/recall", raw=raw)
    assert response.status_code == 400


def test_a_recall_body_nested_1500_deep_is_a_400(alice_api):
    deep = "[" * DEEP + "]" * DEEP
    raw = '{"scope": "' + S + '", "query": "editor", "filters": {"metadata": {"k": ' + deep + "}}}"
    response = alice_api.post("/memory/recall", raw=raw)
    assert response.status_code == 400


NASTY_LIST_PARAMS = [
    "after=" + "9" * 5000,
    "after=" + "9" * 30,
    "after=1e999",
    "after=%00",
    "limit=" + "9" * 5000,
    "limit=1e999",
    "limit=" + quote("[" * DEEP),
    "status=" + quote("\ud800", errors="surrogatepass"),
    "text=" + quote("\U0001f600" * 3000),
    "text=" + quote("[" * DEEP),
    "session_id=" + quote("\u202e" * 500),
    "trust_tier=" + "x" * 5000,
    "include_descendants=" + quote("[" * DEEP),
    "metadata.=1",
    "metadata..=1",
    "source_type=%ff%fe",
    "scope=" + quote("[" * DEEP),
    "scope=" + quote("acme:alice:" + "x" * 100_000),
]


@pytest.mark.parametrize("query", NASTY_LIST_PARAMS, ids=range(len(NASTY_LIST_PARAMS)))
def test_hostile_neighbouring_list_parameters_never_give_a_500(alice_api, query):
    # Given a stored record; when the list is asked with one hostile parameter
    remember(alice_api, "My editor is helix.", {"customer_id": 42})
    before = counts()
    response = listed(alice_api, query)
    # Then the answer is a 200 or a 4xx JSON error, and nothing was written
    assert response.status_code < 500, response.status_code
    if response.status_code >= 400:
        assert response.data["error"]
    assert counts() == before
