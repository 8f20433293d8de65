"""The served OpenAPI document is one a client generator accepts, and says what the API does."""

from __future__ import annotations

import ast
import json
import re
from pathlib import Path

import pytest
from openapi_spec_validator import validate

import actions.errors  # noqa: F401 (defines the classes walked below)
import memory.batch  # noqa: F401
from aetnaweb.api import ERROR_CODES
from aetnaweb.errors import DomainError

ROOT = Path(__file__).resolve().parents[2]
API_MODULES = [
    "aetnaweb/api.py",
    "access/idempotency.py",
    "access/ratelimits.py",
    "access/api.py",
    "memory/api.py",
    "memory/api_batch.py",
    "memory/api_corrections.py",
    "actions/api.py",
    "audit/api.py",
]


@pytest.fixture
def document(client) -> dict:
    response = client.get("/api/v1/openapi.json")
    assert response.status_code == 200
    return json.loads(response.content)


def _operations(document: dict):
    for path, operations in document["paths"].items():
        for method, operation in operations.items():
            yield path, method, operation


def test_the_served_document_validates_as_openapi_3_1(document):
    # Given the document the server serves / When validated / Then no error is raised
    assert document["openapi"].startswith("3.1")
    validate(document)


def test_query_parameter_examples_are_maps_of_example_objects(document):
    # Given the list endpoints whose `scope` parameter carries an example
    params = [
        parameter
        for path, _, op in _operations(document)
        if path.endswith(("/memory/records", "/memory/scenes"))
        for parameter in op["parameters"]
        if parameter["name"] == "scope"
    ]
    # Then the parameter-level examples are a map of {"value": ...} (OpenAPI 3.1)
    assert len(params) == 2
    for parameter in params:
        assert parameter["examples"] == {"example1": {"value": "acme:alice:proj"}}


def test_operation_ids_are_plain_and_unique(document):
    ids = [op["operationId"] for _, _, op in _operations(document)]
    assert len(ids) == len(set(ids))
    for expected in ("remember", "recall", "list_records", "get_record", "scenes", "stage"):
        assert expected in ids
    assert all(re.fullmatch(r"[a-z][a-z_]*", op_id) for op_id in ids)
    assert not any(op_id.startswith(("memory_api", "actions_api", "audit_api")) for op_id in ids)


def test_creates_document_201(document):
    statuses = {op["operationId"]: set(op["responses"]) for _, _, op in _operations(document)}
    for created in ("remember", "propose", "log_action", "stage", "create_checkpoint"):
        assert "201" in statuses[created], created
    # reads stay 200
    assert "201" not in statuses["recall"]
    assert "201" not in statuses["list_records"]


def test_every_list_endpoint_takes_after_and_answers_next_cursor(document):
    schemas = document["components"]["schemas"]
    for op_id, out in (
        ("list_records", "RecordListOut"),
        ("scenes", "ScenesOut"),
        ("list_transactions", "TransactionsOut"),
    ):
        op = next(o for _, _, o in _operations(document) if o["operationId"] == op_id)
        assert "after" in {p["name"] for p in op["parameters"]}, op_id
        assert "next_cursor" in schemas[out]["properties"], out


def test_error_responses_list_their_codes(document):
    error_out = document["components"]["schemas"]["ErrorOut"]
    assert error_out["x-error-codes"]["404"] == {"not_found": ERROR_CODES[404]["not_found"]}
    recall = next(o for _, _, o in _operations(document) if o["operationId"] == "recall")
    assert "`invalid_scope`" in recall["responses"]["400"]["description"]
    assert "`query_error`" in recall["responses"]["400"]["description"]
    forget = next(o for _, _, o in _operations(document) if o["operationId"] == "forget")
    assert "`forget_preview_stale`" in forget["responses"]["409"]["description"]


def test_responses_carry_examples(document):
    schemas = document["components"]["schemas"]
    for name in ("RememberOut", "RecallOut", "ErrorOut"):
        assert schemas[name]["examples"], name


def _documented() -> set[str]:
    return {code for codes in ERROR_CODES.values() for code in codes}


def _subclasses(cls: type) -> list[type]:
    return [sub for direct in cls.__subclasses__() for sub in (direct, *_subclasses(direct))]


def test_every_error_code_the_api_can_send_is_documented(document):
    # Given every literal code in the API modules
    literal: set[str] = set()
    for module in API_MODULES:
        tree = ast.parse((ROOT / module).read_text())
        for node in ast.walk(tree):
            if (
                isinstance(node, ast.keyword)
                and node.arg == "error"
                and isinstance(node.value, ast.Constant)
            ):
                literal.add(node.value.value)
            # Where each refusal helper takes its code: ApiError(status, code, ...),
            # _json_error(status, code, ...), error_response(request, status, code, ...)
            at = {"ApiError": 1, "_json_error": 1, "error_response": 2}.get(
                getattr(getattr(node, "func", None), "id", ""), -1
            )
            if (
                isinstance(node, ast.Call)
                and 0 <= at < len(node.args)
                and isinstance(node.args[at], ast.Constant)
            ):
                literal.add(node.args[at].value)
            if isinstance(node, ast.Dict):
                for key, value in zip(node.keys, node.values, strict=True):
                    if (
                        isinstance(key, ast.Constant)
                        and key.value == "error"
                        and isinstance(value, ast.Constant)
                    ):
                        literal.add(value.value)
    # and every code a domain error class answers with (404 classes answer not_found)
    engine = {
        code
        for cls in _subclasses(DomainError)
        if cls.__module__.split(".")[0] != "tests"
        for code in (cls.code, *cls.extra_codes)
        if cls.status != 404
    }
    reasons = {
        reason
        for module in (*ROOT.glob("memory/services/*.py"), ROOT / "memory/extraction.py")
        for reason in re.findall(r'reason="([a-z_]+)"', module.read_text())
    }
    # Then each is in the documented list
    missing = (literal | engine | reasons) - _documented()
    assert not missing


# -- the guards every operation passes: rate limits and idempotency (issue 15, item 2) --

WRITE_METHODS = {"post", "put", "patch", "delete"}


def test_every_write_operation_takes_the_idempotency_key_header(document):
    # Given every operation the document lists,
    writes = [(p, m, o) for p, m, o in _operations(document) if m in WRITE_METHODS]
    assert len(writes) >= 10  # the walk saw the API's writes, not an empty document
    for path, method, operation in writes:
        # then each write names the header the idempotency middleware honours,
        headers = [p for p in operation.get("parameters", []) if p["in"] == "header"]
        key = [p for p in headers if p["name"] == "Idempotency-Key"]
        assert len(key) == 1, (method, path)
        assert key[0]["required"] is False
        assert key[0]["schema"]["maxLength"] == 255
        # and the refusals it can answer, each with its code.
        responses = operation["responses"]
        assert "`idempotency_key_in_flight`" in responses["409"]["description"], path
        assert "Retry-After" in responses["409"]["headers"], path
        assert "`idempotency_key_reused`" in responses["422"]["description"], path
        assert "`invalid_idempotency_key`" in responses["400"]["description"], path


def test_reads_do_not_advertise_idempotency(document):
    for path, method, operation in _operations(document):
        if method in WRITE_METHODS:
            continue
        names = {p["name"] for p in operation.get("parameters", [])}
        assert "Idempotency-Key" not in names, (method, path)
        assert "422" not in operation["responses"] or "idempotency" not in json.dumps(
            operation["responses"]["422"]
        )


def test_every_operation_that_can_rate_limit_documents_429_with_retry_after(document):
    # Given the operations a token authenticates (the rate limit is counted there),
    guarded = [(p, m, o) for p, m, o in _operations(document) if o.get("security")]
    assert len(guarded) >= 15
    for path, method, operation in guarded:
        # each answers 429 rate_limited with a Retry-After header.
        too_many = operation["responses"]["429"]
        assert "`rate_limited`" in too_many["description"], (method, path)
        assert too_many["headers"]["Retry-After"]["schema"]["type"] == "integer"
        assert too_many["content"]["application/json"]["schema"] == {
            "$ref": "#/components/schemas/ErrorOut"
        }


def test_an_endpoint_s_own_conflicts_keep_their_codes_next_to_idempotency(document):
    forget = next(o for _, _, o in _operations(document) if o["operationId"] == "forget")
    conflict = forget["responses"]["409"]["description"]
    assert "`forget_preview_stale`" in conflict
    assert "`idempotency_key_in_flight`" in conflict


def test_the_documented_header_is_the_one_the_middleware_reads():
    from access import idempotency
    from aetnaweb import api

    assert api.IDEMPOTENCY_HEADER == idempotency.HEADER == "Idempotency-Key"
    assert api.IDEMPOTENT_WRITE_METHODS == idempotency.WRITE_METHODS
    assert {m.upper() for m in WRITE_METHODS} == idempotency.WRITE_METHODS


# -- one dialect (issue 35 item 4): per-operation codes, closed bodies ------------------


def _codes_listed(operation: dict, status: str) -> set[str]:
    return set(re.findall(r"`([a-z_]+)`", operation["responses"][status]["description"]))


def _operation(document: dict, operation_id: str) -> dict:
    return next(o for _, _, o in _operations(document) if o["operationId"] == operation_id)


def test_every_operation_declares_its_refusals(document):
    # Given the operations served and those whose function says what it may refuse
    from aetnaweb.api import api

    declared = set(api._declared_refusals())
    served = {operation["operationId"] for _, _, operation in _operations(document)}
    # Then none falls back to listing the whole catalogue
    assert served - declared == set()


def test_recall_s_400_lists_only_what_recall_can_answer(document):
    recall = _operation(document, "recall")
    assert _codes_listed(recall, "400") == {
        "invalid_request",
        "invalid_json",
        "body_too_large",
        "invalid_field",
        "missing_field",
        "unknown_field",
        "invalid_scope",
        "invalid_idempotency_key",
        "query_error",
        "metadata_error",
    }
    assert _codes_listed(recall, "403") == {"capability_missing"}


def test_remember_s_400_lists_only_what_remember_can_answer(document):
    remember = _operation(document, "remember")
    assert _codes_listed(remember, "400") == {
        "invalid_request",
        "invalid_json",
        "body_too_large",
        "invalid_field",
        "missing_field",
        "unknown_field",
        "invalid_scope",
        "invalid_idempotency_key",
        "extraction_error",
        "metadata_error",
    }
    # A forget's selector codes are not remember's business
    assert "empty_selector" not in remember["responses"]["400"]["description"]


def test_a_read_without_body_lists_no_body_codes(document):
    get_record = _operation(document, "get_record")
    assert _codes_listed(get_record, "400") == {
        "invalid_request",
        "body_too_large",
        "invalid_field",
    }


def test_a_declared_conflict_gets_its_own_response(document):
    erase = _operation(document, "erase_subject")
    assert "legal_hold" in _codes_listed(erase, "409")
    stage = _operation(document, "stage")
    assert "separation_of_duties" not in str(stage["responses"])


def _closed(schema_name: str, schemas: dict, seen: set[str]) -> list[str]:
    """Names of object schemas reachable from ``schema_name`` that accept unknown fields."""
    if schema_name in seen:
        return []
    seen.add(schema_name)
    schema = schemas[schema_name]
    open_ones = [] if schema.get("additionalProperties") is False else [schema_name]
    for ref in re.findall(r"#/components/schemas/(\w+)", json.dumps(schema)):
        open_ones += _closed(ref, schemas, seen)
    return open_ones


def test_every_request_body_refuses_unknown_fields(document):
    # Given every JSON request body and every object nested in one
    schemas = document["components"]["schemas"]
    open_ones: list[str] = []
    for _, _, operation in _operations(document):
        body = operation.get("requestBody", {}).get("content", {}).get("application/json")
        if body is None:
            continue
        ref = body["schema"]["$ref"].rsplit("/", 1)[-1]
        open_ones += _closed(ref, schemas, set())
    # Then each says additionalProperties: false (built on aetnaweb.api.BodyIn)
    assert open_ones == []
