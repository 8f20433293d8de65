"""EV-*, OP-*, PO-*: evidence references, operation proposals and the guard policy."""

from __future__ import annotations

import pytest

from actions import services
from actions.errors import ActionInputError, ActionPolicyViolation
from actions.proposals import DEFAULT_POLICY, EvidenceRef, GuardPolicy, OperationProposal
from aetnaweb.access import SYSTEM
from tests.actions.conftest import SCOPE, sha, table_counts, write_op


def test_evidence_defaults_ev1():
    ref = EvidenceRef(kind="message", ref_id="m1", digest=sha("m1"))
    assert (ref.relation, ref.trust_tier, ref.attested) == (
        "informed_by",
        "untrusted_content",
        False,
    )


def test_evidence_relation_must_be_known_ev2():
    with pytest.raises(ValueError, match="informed_by"):
        EvidenceRef(kind="message", ref_id="m1", digest=sha("m1"), relation="suggested_by")


@pytest.mark.parametrize("field", ["kind", "ref_id", "digest"])
def test_evidence_required_fields_ev3(field):
    values = {"kind": "message", "ref_id": "m1", "digest": sha("m1"), field: ""}
    with pytest.raises(ValueError, match=field):
        EvidenceRef(**values)


def test_evidence_digest_must_be_sha256_hex():
    # T-2
    with pytest.raises(ValueError, match="SHA-256"):
        EvidenceRef(kind="message", ref_id="m1", digest="not-a-digest")


def test_evidence_digest_check_is_case_insensitive_ev4():
    ref = EvidenceRef(kind="message", ref_id="m1", digest=sha("m1").upper())
    assert ref.digest == sha("m1").upper()
    with pytest.raises(ValueError, match="SHA-256"):
        EvidenceRef(kind="message", ref_id="m1", digest=sha("m1")[:63])


@pytest.mark.parametrize("field", ["key", "adapter", "operation"])
def test_operation_proposal_required_fields_op1(field):
    values = {"key": "k", "adapter": "filesystem", "operation": "write_text", field: ""}
    with pytest.raises(ValueError, match=field):
        OperationProposal(**values)


def test_operation_proposal_from_json_form_op1():
    proposal = OperationProposal.from_value(write_op("a.txt", "x", depends_on=["w0"]))
    assert proposal.evidence[0].relation == "authorized_by"
    assert proposal.depends_on == ("w0",)
    with pytest.raises(ActionInputError, match="unknown operation fields"):
        OperationProposal.from_value({**write_op("a.txt", "x"), "surprise": 1})


def test_policy_defaults_and_hash_po1():
    policy = GuardPolicy()
    assert policy.trusted_tiers == {"trusted_user", "user_confirmed"}
    assert policy.require_attested_authority and policy.require_authority_in_enforce
    assert policy.policy_hash == DEFAULT_POLICY.policy_hash
    assert GuardPolicy(require_attested_authority=False).policy_hash != policy.policy_hash


def _authority(tier="trusted_user", attested=True):
    return EvidenceRef(
        kind="message",
        ref_id="m1",
        digest=sha("m1"),
        relation="authorized_by",
        trust_tier=tier,
        attested=attested,
    )


def test_policy_order_po2():
    check = DEFAULT_POLICY.check
    # 1. unknown effects fail closed, before anything else
    with pytest.raises(ActionPolicyViolation, match="unknown effects fail closed"):
        check(mode="observe", key="k", effect_class="unknown_blocked", evidence=[_authority("x")])
    # 2. an untrusted tier may not authorize, even attested
    with pytest.raises(ActionPolicyViolation, match="may inform but cannot authorize"):
        check(
            mode="observe",
            key="k",
            effect_class="verified_compensatable",
            evidence=[_authority("untrusted_content")],
        )
    # 3. trusted but not attested
    with pytest.raises(ActionPolicyViolation, match="not host-attested"):
        check(
            mode="observe",
            key="k",
            effect_class="verified_compensatable",
            evidence=[_authority(attested=False)],
        )
    # 4. enforce needs authorized_by for a mutation; informed_by is not enough
    informed = EvidenceRef(kind="message", ref_id="m1", digest=sha("m1"), trust_tier="trusted_user")
    with pytest.raises(ActionPolicyViolation, match="enforced mutations require authorized_by"):
        check(mode="enforce", key="k", effect_class="verified_compensatable", evidence=[informed])
    # ... but preview mode records it, and 5. read_only needs no authority in enforce
    check(mode="preview", key="k", effect_class="verified_compensatable", evidence=[informed])
    check(mode="enforce", key="k", effect_class="read_only", evidence=[])


def test_policy_violation_is_a_value_error_po3():
    assert issubclass(ActionPolicyViolation, ValueError)


@pytest.mark.django_db
def test_untrusted_evidence_may_not_authorize(actions_root):
    # T-1: Given authorized_by evidence from untrusted content, even attested
    op = write_op("a.txt", "x")
    op["evidence"] = [{**op["evidence"][0], "trust_tier": "untrusted_content", "attested": True}]
    before = table_counts()
    # When it is staged, Then the policy refuses it
    with pytest.raises(ActionPolicyViolation, match="may inform but cannot authorize"):
        services.stage(principal=SYSTEM, scope=SCOPE, operations=[op])
    # And nothing was persisted, not even an audit event
    assert table_counts() == before
    assert services.ActionTransaction.objects.count() == 0
