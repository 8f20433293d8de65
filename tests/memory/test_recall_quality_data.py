"""bench/recall_quality.py's calibration data and arithmetic: the held-out half stays apart."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

import pytest

from memory import ranking

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def bench() -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        "recall_quality", ROOT / "bench/recall_quality.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_calibration_questions_never_repeat_a_held_out_question(bench):
    # Given the bench's questions, split as --calibrate splits them
    questions = bench.rows(bench.QUESTIONS)
    held_out = {(user, project, text) for user, project, text, _key in questions[1::2]}
    extra = bench.rows(bench.CALIBRATION_QUESTIONS)
    # Then no calibration question is a held-out one, and none is asked twice
    assert not held_out & {(user, project, text) for user, project, text, _key in extra}
    assert len({(user, project, text) for user, project, text, _key in extra}) == len(extra)
    # And the set is larger than the half it joins, with both kinds of question
    assert len(extra) >= 100
    assert sum(key == "-" for *_, key in extra) >= 40
    assert sum(key != "-" for *_, key in extra) >= 60


def test_every_calibration_answer_is_a_fact_the_asker_can_see(bench):
    # Given the facts by (user, key) and the scope each was stored in
    stored = {(user, key): project for user, project, key, _text in bench.rows(bench.FACTS)}
    for user, project, text, key in bench.rows(bench.CALIBRATION_QUESTIONS):
        if key == "-":
            continue
        # Then the expected fact exists and is the user's own, at the asked scope or its ancestor
        assert (user, key) in stored, text
        assert stored[(user, key)] in ("*", project), text


def test_margins_are_the_lead_of_the_best_and_the_gap_of_the_others(bench):
    # Given three candidates' matches
    leads = bench.margins([0.9, 0.6, 0.7])
    # Then the best leads the runner-up and the others trail the best
    assert leads == pytest.approx([0.2, -0.3, -0.2])
    # And a lone candidate leads by its match above the semantic floor; a tie leads by nothing
    assert bench.margins([0.5]) == pytest.approx([0.5 - ranking.SEMANTIC_FLOOR])
    assert bench.margins([0.5, 0.5]) == pytest.approx([0.0, 0.0])
    assert bench.margins([]) == []


def test_the_threshold_keeps_the_most_answers_within_a_tenth_of_no_answers(bench):
    # Given ten no-answer questions (best confidences 0.05 ... 0.95) and answered questions
    # whose correct first answers have confidences 0.5 and 0.9, and one wrong first answer
    rows = [(True, step / 20, False, step / 20) for step in range(1, 20, 2)]
    rows += [(False, 0.5, True, 0.5), (False, 0.9, True, 0.9), (False, 0.95, False, 0.95)]
    # When counted at 0.6: four no-answer questions (0.65 ... 0.95) answered, one answer kept
    assert bench.answer_at(rows, 0.6) == (4, 10, 1, 2)
    # Then the chosen threshold lets at most one of ten through (above 0.85) and keeps
    # the answer at 0.9: the lowest such threshold
    threshold = bench.choose_threshold(rows)
    answered, negatives, kept, correct = bench.answer_at(rows, threshold)
    assert answered <= 0.10 * negatives and (kept, correct) == (1, 2)
    assert threshold == 0.86
