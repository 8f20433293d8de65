"""Property (issue 14): any single-row edit or truncation of the evidence is caught.

Caught means at least one of: a chain fails the chain rule, the Merkle log
fails against ``audit_log`` (``manage.py audit verify``), or an older signed
checkpoint no longer verifies (its pins or its signed log root). The edit
may hit ``audit_log``, a stored leaf or a stored node; a truncation removes
the newest rows of ``audit_log`` or of the stored tree.
"""

from __future__ import annotations

import json

import pytest
from django.db import transaction
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from aetnaweb.access import SYSTEM
from audit import notes, tree
from audit.canonical import canonical_json
from audit.checkpoints import verify_checkpoints
from audit.models import AuditEvent, AuditTreeLeaf, AuditTreeNode
from audit.services import create_checkpoint
from audit.verification import COLUMNS, verify_all
from tests.audit.conftest import mixed_chains, tamper
from tests.audit.test_properties import canonical_payload, new_value

pytestmark = pytest.mark.django_db

SUBJECTS = ["acme:alice:proj", "acme:*:*", "zeta:bob:x"]
hex64 = st.text(alphabet="0123456789abcdef", min_size=64, max_size=64)


@pytest.fixture
def signed(tmp_path, settings):
    path = tmp_path / "checkpoint_key"
    notes.write_private_key(path, notes.SignerKey.generate("aetnaweb.test/audit"))
    settings.AETNAWEB_CHECKPOINT_KEY_FILE = str(path)


def caught(checkpoint_line: str) -> bool:
    if not verify_all(principal=SYSTEM).ok or tree.verify_log():
        return True
    [result] = verify_checkpoints([checkpoint_line], principal=SYSTEM)
    return not result.ok


def test_any_single_row_edit_or_truncation_is_caught(signed):
    events = mixed_chains(SUBJECTS, per_subject=5)  # 15 events: leaves, 3 node levels
    line = canonical_json(create_checkpoint(principal=SYSTEM, actor="auditor"))
    sequences = [e.sequence for e in events]
    leaves = list(AuditTreeLeaf.objects.order_by("leaf_index"))
    nodes = list(AuditTreeNode.objects.order_by("node_id"))
    assert not caught(line)

    @settings(max_examples=120, deadline=None, suppress_health_check=list(HealthCheck))
    @given(data=st.data())
    def attack(data):
        kind = data.draw(
            st.sampled_from(
                ["event", "delete event", "truncate events", "leaf", "node", "truncate tree"]
            ),
            label="attack",
        )
        with transaction.atomic():
            if kind == "event":
                target = data.draw(st.sampled_from(events), label="row")
                column = data.draw(st.sampled_from(COLUMNS), label="column")
                old = getattr(AuditEvent.objects.get(pk=target.pk), column)
                if column == "sequence":
                    new = data.draw(st.integers(1, 10**6).filter(lambda n: n not in sequences))
                else:
                    new = data.draw(new_value(column), label="value")
                assume(new != old)
                assume(
                    not (column == "payload" and canonical_payload(new) == canonical_payload(old))
                )
                assume(not (column == "event_id" and new in {e.event_id for e in events}))
                tamper(
                    f"UPDATE audit_log SET {column} = %s WHERE sequence = %s",
                    [new, target.sequence],
                )
            elif kind == "delete event":
                target = data.draw(st.sampled_from(events), label="row")
                tamper("DELETE FROM audit_log WHERE sequence = %s", [target.sequence])
            elif kind == "truncate events":
                keep = data.draw(st.integers(0, len(events) - 1), label="keep")
                # keep the first ``keep`` events, drop the rest (at least one)
                tamper(
                    "DELETE FROM audit_log WHERE sequence > %s",
                    [sequences[keep - 1] if keep else 0],
                )
            elif kind == "leaf":
                leaf = data.draw(st.sampled_from(leaves), label="leaf")
                if data.draw(st.booleans(), label="hash or sequence"):
                    new_hash = data.draw(hex64.filter(lambda h: h != leaf.leaf_hash))
                    tamper(
                        "UPDATE audit_tree_leaf SET leaf_hash = %s WHERE leaf_index = %s",
                        [new_hash, leaf.leaf_index],
                    )
                else:
                    new_sequence = data.draw(
                        st.integers(1, 10**6).filter(lambda n: n not in sequences)
                    )
                    tamper(
                        "UPDATE audit_tree_leaf SET sequence = %s WHERE leaf_index = %s",
                        [new_sequence, leaf.leaf_index],
                    )
            elif kind == "node":
                node = data.draw(st.sampled_from(nodes), label="node")
                new_hash = data.draw(hex64.filter(lambda h: h != node.hash))
                tamper(
                    "UPDATE audit_tree_node SET hash = %s WHERE node_id = %s",
                    [new_hash, node.node_id],
                )
            else:
                keep = data.draw(st.integers(0, len(leaves) - 1), label="keep leaves")
                tamper("DELETE FROM audit_tree_leaf WHERE leaf_index >= %s", [keep])
            verdict = caught(line)
            transaction.set_rollback(True)
        assert verdict, f"{kind} went unnoticed"

    attack()
    # And after every attack was rolled back, the untouched evidence still verifies
    assert not caught(line)
    assert json.loads(line)["log"]["tree_size"] == len(events)
