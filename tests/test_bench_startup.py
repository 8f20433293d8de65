"""The benches start on a machine without the development SECRET_KEY file (issue 29 rest D).

Before: bench/forget_match.py and bench/write_coverage.py set Django up on a
fresh temporary data directory without a key, and stopped at start-up
("development SECRET_KEY: .../secret_key is missing"). They now configure
Django like the other benches (bench/audit_common.configure_django).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def run_bench(script: str, *args: str) -> subprocess.CompletedProcess[str]:
    # No key, no key file, no database: exactly what a fresh checkout's shell holds.
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in {"SECRET_KEY", "SECRET_KEY_FILE", "DATABASE_URL", "AETNAWEB_DATA_DIR"}
    }
    return subprocess.run(
        [sys.executable, str(ROOT / "bench" / script), *args],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
        env=env,
        cwd=ROOT,
    )


@pytest.mark.slow
def test_forget_match_starts_without_the_development_key():
    result = run_bench("forget_match.py", "--sizes", "20", "--samples", "1")
    assert result.returncode == 0, result.stderr
    assert "SECRET_KEY" not in result.stderr
    assert result.stdout.splitlines()[1].split()[0] == "20"


@pytest.mark.slow
def test_write_coverage_starts_without_the_development_key(tmp_path):
    data = tmp_path / "coverage.json"
    data.write_text(
        json.dumps(
            {
                "statements": [{"category": "work", "text": "My editor is helix."}],
                "non_statements": [{"category": "question", "text": "What time is it?"}],
            }
        )
    )
    result = run_bench("write_coverage.py", "--data", str(data))
    assert result.returncode == 0, result.stderr
    assert "statements" in result.stdout and "SECRET_KEY" not in result.stderr
