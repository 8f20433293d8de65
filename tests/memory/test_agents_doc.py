"""docs/agents.md walks through a session with the Python API; this runs it, block by block."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

DOC = Path(__file__).resolve().parents[2] / "docs" / "agents.md"


def python_blocks() -> list[str]:
    return re.findall(r"```python\n(.*?)```", DOC.read_text(), re.DOTALL)


def test_the_walk_through_has_the_steps_the_issue_asks_for():
    code = "\n".join(python_blocks())
    for step in ("remember(", "recall(", "<webpage>", "promote(", "forget(", "receipt"):
        assert step in code


@pytest.mark.django_db
def test_the_python_walk_through_runs_as_written(capsys):
    namespace: dict = {}
    for block in python_blocks():
        exec(compile(block, str(DOC), "exec"), namespace)  # noqa: S102  (our own documentation)
    assert namespace["receipt"]["format"] == "aetnamem-deletion-receipt-v1"
    assert "<relevant_memories>" in capsys.readouterr().out


@pytest.mark.django_db
def test_the_python_walk_through_runs_on_a_make_run_database(capsys, tmp_path, settings):
    # Given the demo data `make run` seeds
    from django.core.management import call_command

    settings.AETNAWEB_DATA_DIR = tmp_path
    call_command("demo")
    capsys.readouterr()
    # When the walk-through runs as written
    namespace: dict = {}
    for block in python_blocks():
        exec(compile(block, str(DOC), "exec"), namespace)  # noqa: S102  (our own documentation)
    # Then every assert in it held
    assert namespace["receipt"]["format"] == "aetnamem-deletion-receipt-v1"
