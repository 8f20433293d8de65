"""LoCoMo: how much of a long conversation the write path keeps, and whether recall finds it.

Usage::

    .venv/bin/python bench/locomo.py --data /path/to/locomo10.json \\
        [--conversations 1-5] [--path remember|import] [--misses N] [--database DIR]

LoCoMo (Maharana et al. 2024; data set under CC BY-NC 4.0, so it is never
committed here nor downloaded at run time: pass the file you hold) has long
two-person conversations, each with questions naming the turns (``dia_id``)
that hold the answer. Conversations 1-5 are the tuning set; 6-10 are held out
for acceptance, so the default range is 1-5.

On a fresh temporary SQLite database (deleted afterwards) each conversation
is stored in a scope of its own (``locomo:cN:*``) through the chosen path:

- ``remember``: the documented remember path, one batch per session (at most
  the batch limit per call), each turn's text prefixed with its date and
  speaker, the turn id (``dia_id``) and session id given with it;
- ``import``: the conversation import (``services.import_conversation``),
  each turn with its speaker, role, time, turn id and session id.

Then every question of categories 1-4 (category 5, the adversarial ones, is
set apart) goes through ``services.recall`` at that scope, limit 10. A
returned record maps back to its turn through the turn id it was stored with.
Printed: turns stored (at least one active record), the share of questions
with at least one answer turn in the top 5 and the top 10, the share of answer
turns retrieved in the top 10, and the same for BM25 (``rank_bm25``'s
BM25Okapi) over the raw turns of the same conversation; plus timings.

``--database DIR`` keeps the SQLite database in DIR instead of deleting it,
and a later run given the same DIR (and the same ``--path``) recalls from it
without storing again: a ranking change is then measured on exactly the same
stored records, in seconds instead of minutes (the store timings are not
printed for a reused database). The directory is the caller's to delete.
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
QUESTION_CATEGORIES = (1, 2, 3, 4)
TOP_K = 10
_WORD = re.compile(r"[a-z0-9]+")


@dataclass(frozen=True)
class Turn:
    dia_id: str
    session_id: str
    speaker: str
    text: str
    occurred_at: datetime
    caption: str = ""

    @property
    def words(self) -> str:
        """What was said, a shared photo's caption included (as LoCoMo's own baselines do)."""
        return f"{self.text} [shares a photo: {self.caption}]" if self.caption else self.text


@dataclass(frozen=True)
class Question:
    text: str
    category: int
    evidence: tuple[str, ...]


@dataclass
class Conversation:
    number: int
    speakers: tuple[str, str]
    turns: list[Turn]
    questions: list[Question]


@dataclass
class Tally:
    questions: int = 0
    hit5: int = 0
    hit10: int = 0
    evidence: int = 0
    evidence_found: int = 0
    distinct_turns: int = 0  # distinct turns among the top 10 (a turn's facts repeat it)
    latencies: list[float] = field(default_factory=list)

    def add(self, ranked_turns: Sequence[str], wanted: Sequence[str]) -> bool:
        self.questions += 1
        top5, top10 = set(ranked_turns[:5]), set(ranked_turns[:TOP_K])
        self.hit5 += bool(top5 & set(wanted))
        hit = bool(top10 & set(wanted))
        self.hit10 += hit
        self.evidence += len(wanted)
        self.evidence_found += len(top10 & set(wanted))
        self.distinct_turns += len(top10 - {""})
        return hit

    def line(self, name: str) -> str:
        share = lambda n, d: n / d if d else 0.0  # noqa: E731
        return (
            f"{name:<10} questions {self.questions:4d}  top-5 {share(self.hit5, self.questions):.3f}"
            f"  top-10 {share(self.hit10, self.questions):.3f}"
            f"  answer turns retrieved {share(self.evidence_found, self.evidence):.3f}"
            f"  distinct turns in top 10 {share(self.distinct_turns, self.questions):.1f}"
        )


def parse_range(text: str) -> list[int]:
    numbers: list[int] = []
    for part in text.split(","):
        low, _, high = part.partition("-")
        numbers.extend(range(int(low), int(high or low) + 1))
    return numbers


def _session_time(text: str) -> datetime:
    # LoCoMo writes "1:56 pm on 8 May, 2023".
    return datetime.strptime(text.strip().upper(), "%I:%M %p ON %d %B, %Y").replace(tzinfo=UTC)


def _dia_id(value: str) -> str:
    # A few evidence ids are written "D30:05" or "D:11:26"; the turns are "D30:5".
    match = re.fullmatch(r"D:?(\d+):0*(\d+)", value.strip())
    return f"D{match.group(1)}:{match.group(2)}" if match else value.strip()


def load(path: Path, numbers: Sequence[int]) -> list[Conversation]:
    data = json.loads(path.read_text(encoding="utf-8"))
    conversations = []
    for number in numbers:
        sample = data[number - 1]
        body = sample["conversation"]
        turns: list[Turn] = []
        session = 1
        while f"session_{session}" in body:
            when = _session_time(body[f"session_{session}_date_time"])
            for turn in body[f"session_{session}"]:
                turns.append(
                    Turn(
                        dia_id=_dia_id(turn["dia_id"]),
                        session_id=f"S{session}",
                        speaker=turn["speaker"],
                        text=turn["text"],
                        occurred_at=when,
                        caption=turn.get("blip_caption") or "",
                    )
                )
            session += 1
        questions = [
            Question(
                str(qa["question"]), int(qa["category"]), tuple(_dia_id(e) for e in qa["evidence"])
            )
            for qa in sample["qa"]
            if int(qa["category"]) in QUESTION_CATEGORIES and qa.get("evidence")
        ]
        speakers = (body["speaker_a"], body["speaker_b"])
        conversations.append(Conversation(number, speakers, turns, questions))
    return conversations


def setup_django(directory: Path) -> None:
    """Django on a throwaway SQLite database in ``directory`` (the memory benches' helper)."""
    sys.path.insert(0, str(ROOT / "bench"))
    from memory_scale import setup_django as setup_memory_bench

    setup_memory_bench(directory, "locomo.sqlite3")


def _by_session(turns: Sequence[Turn]) -> list[list[Turn]]:
    sessions: dict[str, list[Turn]] = {}
    for turn in turns:
        sessions.setdefault(turn.session_id, []).append(turn)
    return list(sessions.values())


def store_remember(scope: str, conversation: Conversation) -> None:
    """The documented remember path: one batch per session, date and speaker in the text."""
    from aetnaweb.access import SYSTEM
    from memory.batch import MAX_BATCH_ITEMS, BatchItem, remember_batch

    for session in _by_session(conversation.turns):
        items = [
            BatchItem(
                text=f"[{turn.occurred_at:%d %B %Y}] {turn.speaker}: {turn.words}",
                session_id=turn.session_id,
                turn_id=turn.dia_id,
            )
            for turn in session
        ]
        for start in range(0, len(items), MAX_BATCH_ITEMS):
            remember_batch(
                scope=scope, items=items[start : start + MAX_BATCH_ITEMS], principal=SYSTEM
            )


def store_import(scope: str, conversation: Conversation) -> None:
    """The conversation import: speaker A is the user, speaker B another person."""
    from aetnaweb.access import SYSTEM
    from memory import services
    from memory.limits import MAX_IMPORT_TURNS

    user = conversation.speakers[0]
    turns = [
        {
            "text": turn.words,
            "speaker": turn.speaker,
            "role": "user" if turn.speaker == user else "other",
            "occurred_at": turn.occurred_at,
            "turn_id": turn.dia_id,
            "session_id": turn.session_id,
        }
        for turn in conversation.turns
    ]
    for start in range(0, len(turns), MAX_IMPORT_TURNS):
        services.import_conversation(
            scope=scope, turns=turns[start : start + MAX_IMPORT_TURNS], principal=SYSTEM
        )


STORE_PATHS: dict[str, Callable[[str, Conversation], None]] = {
    "remember": store_remember,
    "import": store_import,
}


def turns_stored(scope: str) -> set[str]:
    from memory.models import Record, Status

    return set(
        Record.objects.filter(scope=scope, status=Status.ACTIVE).values_list("turn_id", flat=True)
    )


def recall_turns(
    scope: str, question: str, turn_of: dict[str, str], min_confidence: float | None = None
) -> list[str]:
    """The turns behind the top-10 recalled records, in rank order (one entry per record).

    ``min_confidence`` None: the product's default threshold (what an agent gets);
    0: ranking alone, as BM25 is measured.
    """
    from aetnaweb.access import SYSTEM
    from memory import services

    threshold = {} if min_confidence is None else {"min_confidence": min_confidence}
    result = services.recall(
        scope=scope, query=question, limit=TOP_K, principal=SYSTEM, **threshold
    )
    return [turn_of.get(record_id, "") for record_id in result.record_ids]


def bm25_ranker(turns: Sequence[Turn]) -> Callable[[str], list[str]]:
    from rank_bm25 import BM25Okapi

    corpus = [_WORD.findall(turn.words.lower()) or [""] for turn in turns]
    index = BM25Okapi(corpus)

    def rank(question: str) -> list[str]:
        scores = index.get_scores(_WORD.findall(question.lower()))
        order = sorted(range(len(turns)), key=lambda i: -scores[i])[:TOP_K]
        return [turns[i].dia_id for i in order]

    return rank


def run(
    conversations: Sequence[Conversation],
    path: str,
    misses: int,
    min_confidence: float | None = None,
    stored_already: bool = False,
) -> None:
    from memory.models import Record

    store = STORE_PATHS[path]
    recalled, bm25 = Tally(), Tally()
    total_turns = total_stored = 0
    store_seconds = store_cpu = store_thread = 0.0
    shown = 0
    for conversation in conversations:
        scope = f"locomo:c{conversation.number}:*"
        started, cpu, own = time.perf_counter(), time.process_time(), time.thread_time()
        if not stored_already:
            store(scope, conversation)
        elapsed = time.perf_counter() - started
        store_seconds += elapsed
        # This process's CPU time too: on a shared machine the wall clock also
        # counts the time other processes held the cores.
        store_cpu += time.process_time() - cpu
        # The calling thread's alone: with the embedding split over threads
        # (AETNAWEB_EMBED_THREADS) this is the wall time on idle cores.
        store_thread += time.thread_time() - own
        stored = turns_stored(scope)
        stored_here = sum(turn.dia_id in stored for turn in conversation.turns)
        total_turns += len(conversation.turns)
        total_stored += stored_here
        turn_of = dict(Record.objects.filter(scope=scope).values_list("record_id", "turn_id"))
        rank_bm25 = bm25_ranker(conversation.turns)
        here = Tally()
        for question in conversation.questions:
            asked = time.perf_counter()
            ranked = recall_turns(scope, question.text, turn_of, min_confidence)
            recalled.latencies.append(time.perf_counter() - asked)
            hit = here.add(ranked, question.evidence)
            recalled.add(ranked, question.evidence)
            bm25.add(rank_bm25(question.text), question.evidence)
            if not hit and shown < misses:
                shown += 1
                print(f"  miss c{conversation.number}: {question.text!r} wants {question.evidence}")
        print(
            f"conversation {conversation.number}: {len(conversation.turns)} turns, "
            f"{stored_here} stored, {elapsed:.1f} s "
            f"({len(conversation.turns) / elapsed:.0f} turns/s); {here.line(path)}"
        )
    print()
    if stored_already:
        print(f"turns stored {total_stored} of {total_turns} (a kept database: not timed)")
    else:
        print(
            f"turns stored {total_stored} of {total_turns} ({total_stored / total_turns:.1%});"
            f" stored at {total_turns / store_seconds:.0f} turns/s"
            f" ({store_seconds:.1f} s for {total_turns} turns);"
            f" {total_turns / store_cpu:.0f} turns per CPU second of this process,"
            f" {total_turns / store_thread:.0f} per CPU second of the calling thread"
        )
    print(recalled.line(path))
    print(bm25.line("bm25"))
    latencies = sorted(recalled.latencies)
    print(
        f"recall latency p50 {statistics.median(latencies) * 1000:.1f} ms, "
        f"p95 {latencies[int(len(latencies) * 0.95)] * 1000:.1f} ms"
    )


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--data", type=Path, required=True, help="locomo10.json")
    parser.add_argument("--conversations", default="1-5", help="e.g. 1-5 (the tuning set)")
    parser.add_argument("--path", default="remember", choices=sorted(STORE_PATHS))
    parser.add_argument("--misses", type=int, default=0, help="print up to N missed questions")
    parser.add_argument(
        "--min-confidence",
        type=float,
        default=None,
        help="recall's threshold (default: the product's; 0 ranks only, as BM25 does)",
    )
    parser.add_argument(
        "--database",
        type=Path,
        help="keep the database in this directory; reuse it if a run already stored there",
    )
    args = parser.parse_args(argv)
    conversations = load(args.data, parse_range(args.conversations))
    kept = args.database
    directory = kept or Path(tempfile.mkdtemp(prefix="aetnaweb-locomo-"))
    marker = directory / f"stored-{args.path}-{args.conversations}"
    stored_already = kept is not None and marker.exists()
    if kept is not None and not stored_already and (directory / "locomo.sqlite3").exists():
        print(f"{directory} holds another run's database; give an empty directory", file=sys.stderr)
        return 2
    try:
        directory.mkdir(parents=True, exist_ok=True)
        setup_django(directory)
        run(conversations, args.path, args.misses, args.min_confidence, stored_already)
        if kept is not None:
            marker.touch()
    finally:
        if kept is None:
            shutil.rmtree(directory, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
