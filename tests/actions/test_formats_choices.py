"""The guarded-action enumerations are TextChoices (issue 34 item 7) and still the spec's
wire strings: the same values in the same order, hashed and printed as plain strings, and
the models' choices unchanged (no migration)."""

from __future__ import annotations

import io

import pytest
from django.core.management import call_command
from django.db import models

from actions import formats
from actions.models import ActionAttempt, ActionOperation, ActionResolution, ActionTransaction
from audit.canonical import canonical_json, digest

SPEC = {
    formats.Mode: ["off", "observe", "preview", "enforce"],
    formats.State: [
        "draft",
        "staged",
        "awaiting_approval",
        "approved",
        "committing",
        "committed",
        "aborted",
        "compensating",
        "compensated",
        "partial",
        "uncertain",
        "recovery_required",
    ],
    formats.OperationState: [
        "staged",
        "executing",
        "applied",
        "verified",
        "compensating",
        "compensated",
        "failed",
        "uncertain",
        "skipped",
    ],
    formats.EffectClass: [
        "read_only",
        "exact_transactional",
        "verified_compensatable",
        "irreversible_staged",
        "observe_only",
        "unknown_blocked",
    ],
    formats.AttemptState: ["executing", "verified", "uncertain", "failed"],
    formats.Phase: ["execute", "compensate"],
    formats.Relation: ["informed_by", "authorized_by"],
    formats.PayloadKind: ["prepared", "execution_receipt", "compensation_receipt"],
}


@pytest.mark.parametrize("choices", list(SPEC), ids=lambda c: c.__name__)
def test_each_enumeration_is_text_choices_with_the_spec_values(choices):
    assert issubclass(choices, models.TextChoices)
    assert choices.values == SPEC[choices]


def test_a_member_hashes_prints_and_compares_as_its_wire_string():
    member = formats.AWAITING_APPROVAL
    assert member is formats.State.AWAITING_APPROVAL and member == "awaiting_approval"
    assert canonical_json({"state": member}) == '{"state":"awaiting_approval"}'
    assert digest([formats.MODE_ENFORCE]) == digest(["enforce"])
    assert f"{member}" == str(member) == "awaiting_approval"
    # a refusal listing states reads as it did with plain strings
    assert repr([formats.APPROVED]) == "['approved']"


def test_the_flat_tuples_follow_the_classes():
    assert tuple(formats.Mode) == formats.MODES
    assert tuple(formats.State) == formats.TRANSACTION_STATES
    assert tuple(formats.OperationState) == formats.OPERATION_STATES
    assert tuple(formats.EffectClass) == formats.EFFECT_CLASSES
    assert tuple(formats.AttemptState) == formats.ATTEMPT_STATES
    assert tuple(formats.Relation) == formats.RELATIONS


def test_models_take_the_choices_of_the_classes():
    field = ActionTransaction._meta.get_field
    assert field("mode").choices == formats.Mode.choices
    assert field("state").choices == formats.State.choices
    assert ActionOperation._meta.get_field("state").choices == formats.OperationState.choices
    assert ActionOperation._meta.get_field("effect_class").choices == formats.EffectClass.choices
    assert ActionAttempt._meta.get_field("state").choices == formats.AttemptState.choices
    outcome = ActionResolution._meta.get_field("outcome")
    assert outcome.choices == ActionResolution.Outcome.choices == list(ActionResolution.OUTCOMES)


@pytest.mark.django_db
def test_the_choices_need_no_migration():
    # makemigrations --check exits non-zero when a model's recorded choices differ
    call_command("makemigrations", "actions", "--check", "--dry-run", stdout=io.StringIO())
