"""Property-based run of the served OpenAPI schema: no input produces a server error.

Schemathesis reads ``/api/v1/openapi.json`` from the WSGI application and, for
every operation, sends a bounded, deterministic set of generated requests
(valid and invalid bodies, parameters and scopes) with a live token for
``acme:alice:*``. Every response must be a non-5xx, with a documented status
code, the documented content type and a body matching the documented schema.
"""

from __future__ import annotations

import pytest
import schemathesis
from django.core import signals
from django.core.wsgi import get_wsgi_application
from django.db import close_old_connections
from hypothesis import HealthCheck, Phase, settings
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from tests.api.conftest import issue_token

MAX_EXAMPLES = 25  # per operation; ~20 operations keep the whole run well under a minute

schema = schemathesis.openapi.from_wsgi("/api/v1/openapi.json", get_wsgi_application())


@pytest.fixture
def bearer(db) -> dict[str, str]:
    return {"Authorization": f"Bearer {issue_token('acme:alice:*')}"}


@pytest.fixture
def checkpoint_sink(settings, tmp_path):
    settings.AETNAWEB_CHECKPOINT_SINK = str(tmp_path / "checkpoints.jsonl")


@pytest.fixture(autouse=True)
def keep_the_test_connection_open():
    # Like Django's test client: the WSGI handler must not close the test's
    # connection (inside its transaction) at the end of each request.
    signals.request_started.disconnect(close_old_connections)
    signals.request_finished.disconnect(close_old_connections)
    yield
    signals.request_started.connect(close_old_connections)
    signals.request_finished.connect(close_old_connections)


@pytest.mark.django_db
@schema.parametrize()
@settings(
    max_examples=MAX_EXAMPLES,
    derandomize=True,
    database=None,
    deadline=None,
    phases=[Phase.explicit, Phase.generate],
    suppress_health_check=list(HealthCheck),
)
def test_no_input_makes_the_api_fail(case, bearer, actions_root, checkpoint_sink):
    case.call_and_validate(
        headers=bearer,
        checks=[
            not_a_server_error,
            status_code_conformance,
            content_type_conformance,
            response_schema_conformance,
        ],
    )
