"""The OpenClaw plugin (clients/openclaw) against a live server: its smoke test.

Starts pytest-django's live server, issues a token on Alice's subtree, installs
the locked dependencies of the TypeScript client and of the plugin (``npm ci``,
once per lockfile; the plugin's ``.npmrc`` skips install scripts) and runs the
plugin's ``npm test``: the client and the plugin are compiled (type-checked
against the ``openclaw`` package's plugin SDK types), then ``node --test`` drives
every hook and tool against the server and runs ``tools/verify_audit.py`` on the
forget receipt. ``AETNAWEB_OPENCLAW_TRANSCRIPT=<file>`` makes it write a session
transcript there. Without node/npm the test is skipped, unless
``AETNAWEB_REQUIRE_BROWSER=1`` (CI), which makes a missing tool a failure.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.api.conftest import issue_token

pytestmark = pytest.mark.django_db(transaction=True)

REPO = Path(__file__).resolve().parents[2]
CLIENT = REPO / "clients" / "typescript"
PLUGIN = REPO / "clients" / "openclaw"
NPM_TIMEOUT = 900


def _require(tool: str) -> str:
    found = shutil.which(tool)
    if found is None:
        reason = f"{tool} is missing: install Node.js 20+ to run the OpenClaw plugin's tests"
        if os.environ.get("AETNAWEB_REQUIRE_BROWSER") == "1":
            pytest.fail(reason + " (AETNAWEB_REQUIRE_BROWSER=1)")
        pytest.skip(reason)
    return found


def _run(command: list[str], cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        command, cwd=cwd, env=env, capture_output=True, text=True, timeout=NPM_TIMEOUT, check=False
    )


def _install(npm: str, package: Path) -> None:
    """``npm ci`` in ``package`` unless its node_modules already match its lockfile."""
    stamp = package / "node_modules" / ".aetnaweb-lock-sha256"
    lock = hashlib.sha256((package / "package-lock.json").read_bytes()).hexdigest()
    if stamp.exists() and stamp.read_text() == lock:
        return
    done = _run(
        [npm, "ci", "--prefer-offline", "--no-audit", "--no-fund"], package, dict(os.environ)
    )
    assert done.returncode == 0, f"npm ci in {package.name} failed:\n{done.stdout}\n{done.stderr}"
    stamp.write_text(lock)


@pytest.fixture(scope="session")
def plugin_npm() -> str:
    """npm, with the client's and the plugin's locked dependencies installed."""
    _require("node")
    npm = _require("npm")
    _install(npm, CLIENT)
    _install(npm, PLUGIN)
    return npm


def test_the_openclaw_plugin_smoke_test_passes_against_a_live_server(plugin_npm, live_server):
    # Given a live server and a token on Alice's subtree
    env = {
        **os.environ,
        "AETNAWEB_URL": str(live_server.url),
        "AETNAWEB_TOKEN": issue_token("acme:alice:*"),
        "AETNAWEB_PYTHON": sys.executable,
        "AETNAWEB_REPO": str(REPO),
    }
    # When the plugin is built and its smoke test drives every hook and tool
    done = _run([plugin_npm, "test"], PLUGIN, env)
    # Then every test passed (the output is the failure message otherwise)
    assert done.returncode == 0, f"npm test failed:\n{done.stdout[-20000:]}\n{done.stderr[-5000:]}"
    assert "# fail 0" in done.stdout and "# pass 0" not in done.stdout, done.stdout[-5000:]
