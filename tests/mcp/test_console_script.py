"""The ``aetnaweb`` console script runs the project's commands from any directory."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from memory.models import Record
from tests.mcp.conftest import subprocess_env


def console_script() -> str:
    beside_python = Path(sys.executable).parent / "aetnaweb"
    found = str(beside_python) if beside_python.exists() else shutil.which("aetnaweb")
    assert found, "the aetnaweb console script is not installed (pip install -e .)"
    return found


@pytest.mark.django_db(transaction=True)
def test_console_script_runs_a_command_from_another_directory(tmp_path):
    # Given a directory with no checkout in it, and the database named by the environment
    elsewhere = tmp_path / "agent-host"
    elsewhere.mkdir()
    # When the agent host runs a memory command through the console script
    result = subprocess.run(
        [console_script(), "memory", "remember", "acme:alice:proj", "My pager is 2202", "--json"],
        cwd=elsewhere,
        env=subprocess_env(),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    # Then it wrote into that database
    assert result.returncode == 0, result.stderr
    assert Record.objects.filter(scope="acme:alice:proj", fact_key="pager").exists()
    assert list(elsewhere.iterdir()) == []


@pytest.mark.django_db(transaction=True)
def test_console_script_mcp_refuses_a_bad_scope_with_exit_2(tmp_path):
    result = subprocess.run(
        [console_script(), "mcp", "--scope", "acme:al ice:*"],
        cwd=tmp_path,
        env=subprocess_env(),
        input="",
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 2
    assert result.stdout == ""
    assert len(result.stderr.strip().splitlines()) == 1
    assert "may only contain" in result.stderr
