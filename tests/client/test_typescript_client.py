"""The TypeScript client (clients/typescript) against a live server: its own test suite.

Starts pytest-django's live server, issues tokens, installs the package's locked
dependencies (``npm ci``, once per lockfile) and runs ``npm test`` (tsc, then
``node --test``) with the server's URL and the tokens in the environment; fails
when that fails. Without node/npm the test is skipped, unless
``AETNAWEB_REQUIRE_BROWSER=1`` (CI), which makes a missing tool a failure.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
from datetime import timedelta
from pathlib import Path

import pytest
from django.utils import timezone

from access import tokens
from aetnaweb.access import SYSTEM
from tests.api.conftest import ALL_TOKEN_CAPS, issue_token
from tests.api.test_actions_api import write_op
from tests.factories import ensure_authorizing_episode

pytestmark = pytest.mark.django_db(transaction=True)

PACKAGE = Path(__file__).resolve().parents[2] / "clients" / "typescript"
STAMP = PACKAGE / "node_modules" / ".aetnaweb-lock-sha256"
NPM_TIMEOUT = 600


def _require(tool: str) -> str:
    found = shutil.which(tool)
    if found is None:
        reason = f"{tool} is missing: install Node.js 20+ to run the TypeScript client's tests"
        if os.environ.get("AETNAWEB_REQUIRE_BROWSER") == "1":
            pytest.fail(reason + " (AETNAWEB_REQUIRE_BROWSER=1)")
        pytest.skip(reason)
    return found


def _run(command: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        command,
        cwd=PACKAGE,
        env=env,
        capture_output=True,
        text=True,
        timeout=NPM_TIMEOUT,
        check=False,
    )


@pytest.fixture(scope="session")
def npm() -> str:
    """npm, with the package's locked dependencies installed (``npm ci`` once per lockfile)."""
    _require("node")
    npm = _require("npm")
    lock = hashlib.sha256((PACKAGE / "package-lock.json").read_bytes()).hexdigest()
    if not (STAMP.exists() and STAMP.read_text() == lock):
        done = _run([npm, "ci", "--prefer-offline", "--no-audit", "--no-fund"], dict(os.environ))
        assert done.returncode == 0, f"npm ci failed:\n{done.stdout}\n{done.stderr}"
        STAMP.write_text(lock)
    return npm


def test_the_typescript_client_suite_passes_against_a_live_server(
    npm, live_server, settings, tmp_path
):
    # Given a live server with guarded actions, checkpoints and inline jobs configured
    settings.AETNAWEB_ACTIONS_ROOT = str(tmp_path)
    settings.AETNAWEB_CHECKPOINT_SINK = str(tmp_path / "checkpoints.jsonl")
    settings.TASKS = {
        "default": {
            "BACKEND": "django.tasks.backends.immediate.ImmediateBackend",
            "QUEUES": ["default"],
        },
    }
    (tmp_path / "notes").mkdir()
    ensure_authorizing_episode("msg-1")  # the user message the staged plan's evidence cites
    # And tokens: everything on Alice's subtree, read-only, a 2-per-minute one, Dana's
    limited = tokens.create_token(
        principal=SYSTEM,
        name="limited",
        scope="acme:alice:*",
        capabilities=ALL_TOKEN_CAPS,
        expires_at=timezone.now() + timedelta(days=1),
        rate_limit_per_minute=2,
    ).secret
    env = {
        **os.environ,
        "AETNAWEB_URL": str(live_server.url),
        "AETNAWEB_TOKEN": issue_token("acme:alice:*"),
        "AETNAWEB_READ_TOKEN": issue_token("acme:alice:*", ["read"]),
        "AETNAWEB_LIMITED_TOKEN": limited,
        "AETNAWEB_SUBJECT_TOKEN": issue_token("acme:dana:*"),
        "AETNAWEB_ACTION_OPERATION": json.dumps(write_op(path="notes/a.txt")),
    }
    # When the package's own suite runs against it
    done = _run([npm, "test"], env)
    # Then every test passed (the output is the failure message otherwise)
    assert done.returncode == 0, f"npm test failed:\n{done.stdout[-20000:]}\n{done.stderr[-5000:]}"
    assert "# fail 0" in done.stdout and "# pass 0" not in done.stdout, done.stdout[-5000:]
