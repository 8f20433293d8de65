"""The service modules stay readable: no function over MAX_FUNCTION_LINES lines (issue 11).

Each file of memory/services/ and actions/services/, memory/corrections.py,
actions/selectors.py and actions/demo.py is parsed and every function and
method measured from its ``def`` line to its last line (decorators not
counted). The files are globbed, so a module added later is covered too.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
MAX_FUNCTION_LINES = 80
CHECKED = sorted(
    {
        *ROOT.glob("memory/services/*.py"),
        *ROOT.glob("actions/services/*.py"),
        ROOT / "memory" / "corrections.py",
        ROOT / "actions" / "selectors.py",
        ROOT / "actions" / "demo.py",
    }
)


def long_functions(source: str, limit: int = MAX_FUNCTION_LINES) -> list[tuple[str, int]]:
    """(name, lines) of every function in ``source`` longer than ``limit`` lines."""
    tree = ast.parse(source)
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            assert node.end_lineno is not None
            lines = node.end_lineno - node.lineno + 1
            if lines > limit:
                found.append((node.name, lines))
    return found


def test_the_checked_files_include_the_memory_package():
    # Given the glob, then the memory package's workflow modules are all measured
    names = {path.relative_to(ROOT).as_posix() for path in CHECKED}
    assert {
        "memory/services/__init__.py",
        "memory/services/remembering.py",
        "memory/services/recalling.py",
        "memory/services/scoring.py",
        "memory/services/forgetting.py",
        "memory/corrections.py",
    } <= names


def test_the_checked_files_include_the_actions_package():
    # Given the glob, then the actions package's workflow modules are all measured
    names = {path.relative_to(ROOT).as_posix() for path in CHECKED}
    assert {
        "actions/services/__init__.py",
        "actions/services/staging.py",
        "actions/services/decide.py",
        "actions/services/committing.py",
        "actions/services/aftercare.py",
        "actions/services/journal.py",
        "actions/services/_ledger.py",
        "actions/selectors.py",
        "actions/demo.py",
    } <= names


@pytest.mark.parametrize("path", CHECKED, ids=lambda path: path.relative_to(ROOT).as_posix())
def test_no_function_is_longer_than_the_limit(path):
    # Given a service module, when every function is measured, then none is too long
    assert long_functions(path.read_text()) == [], (
        f"{path.relative_to(ROOT)}: split these into named steps"
    )


def test_the_measure_catches_a_long_function_and_a_long_method():
    # Given a function and a method of 81 lines, and one of exactly 80
    body = "".join(f"    x{n} = {n}\n" for n in range(80))
    source = (
        f"def too_long():\n{body}\n"
        f"def at_limit():\n{body[: body.rindex('    x79')]}\n"
        "class Holder:\n" + f"    async def method(self):\n{body.replace('    ', '        ')}"
    )
    # When measured, then both 81-line functions are reported and the 80-line one is not
    assert long_functions(source) == [("too_long", 81), ("method", 81)]
