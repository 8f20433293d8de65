"""The full-text index over active records: SQLite FTS5 or PostgreSQL full-text search.

The index holds exactly the records recall may return (status ``active``).
:mod:`memory.services` keeps it in step with explicit statements in the same
transaction as every insert, promotion, supersession and tombstone; nothing
here runs on its own.

SQLite: an FTS5 table with the porter stemmer over unicode61. Each record is
indexed as its words (stop words dropped), every word prefixed with a
digits-only token naming the record's scope, so ``<acme:alice:*>report`` and
``<acme:bob:*>report`` are different index terms. A query asks for exactly
the query words under exactly the visible scopes' prefixes: the index itself
does the scope restriction, and a query reads only the postings of its words
*in those scopes*, so its cost follows what the scope can see, not how much
the whole store holds. (Digits are consonants to the porter stemmer, so the
prefix changes neither a word's vowels nor its measure: ``runs`` and
``running`` still meet.)

PostgreSQL: a side table with an ``english`` tsvector (GIN) and the scope.

Recall asks for a bounded top-N of candidates, joined to the record table so
the status and scope are re-checked by the database too; it never loads a
scope's records into Python.
"""

from __future__ import annotations

import hashlib
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from django.db import connection

from aetnaweb.postgresql import CUSTOM_PLAN
from aetnaweb.sql import execute_rows
from memory import metadata as record_metadata
from memory import ranking, vectors
from memory.extraction import word_tokens

MAX_QUERY_TERMS = 16
MAX_TERM_CHARS = 64

# English function words: they carry no topic, so they never count towards
# relevance. PostgreSQL's english configuration drops its own list as well;
# dropping these first keeps both databases scoring the same terms.
_STOP_WORDS_TEXT = """
    a about above after again against all am an and any are as at be because been before
    being below between both but by can could did do does doing down during each few for
    from further had has have having he her here hers herself him himself his how i if in
    into is it its itself just me more most my myself no nor not now of off on once only or
    other our ours ourselves out over own same she should so some such than that the their
    theirs them themselves then there these they this those through to too under until up
    very was we were what when where which while who whom why will with would you your
    yours yourself yourselves s t don doesn didn isn wasn aren weren won wouldn shouldn
    couldn ll re ve d m o y user users
"""
STOP_WORDS = frozenset(_STOP_WORDS_TEXT.split())


@dataclass(frozen=True)
class IndexHit:
    """One candidate from the index: the record, its raw text score and matched query terms.

    ``terms`` names the query words it holds and ``length`` counts its indexed
    words (stop words dropped): BM25's term presence and document length
    (:func:`memory.ranking.bm25`).
    """

    pk: int
    record_id: str
    raw: float
    matched_terms: int
    terms: frozenset[str] = frozenset()
    length: int = 0


@dataclass(frozen=True)
class LexicalMatches:
    """The full-text candidates and the statistics BM25 weighs them by.

    ``postings`` is how many visible active records hold each query word
    (counted up to COMMON_POSTINGS + 1); ``visible`` is how many active
    records the visible scopes hold (the per-scope counters).
    """

    hits: list[IndexHit]
    postings: dict[str, int]
    visible: int


def query_terms(query: str) -> list[str]:
    """Distinct word tokens of a query, stop words dropped, in order, at most 16."""
    terms: list[str] = []
    for token in word_tokens(query):
        if token in STOP_WORDS or len(token) > MAX_TERM_CHARS or token in terms:
            continue
        terms.append(token)
        if len(terms) == MAX_QUERY_TERMS:
            break
    return terms


def scope_key(scope: str) -> str:
    """A fixed-width, digits-only token naming one scope inside the SQLite index.

    Digits only, so the porter stemmer treats it as leading consonants and
    stems the word after it as it would the bare word; fixed width, so a
    prefixed term can never be read as another scope's. The scope is also
    re-checked on the joined record row, so a hash collision could never leak.
    """
    return f"{int(hashlib.sha256(scope.encode('utf-8')).hexdigest()[:13], 16):016d}"


def scoped_terms(scope: str, text: str) -> str:
    """What the SQLite index stores for a record: its words, each under its scope's prefix."""
    key = scope_key(scope)
    return " ".join(
        key + token
        for token in word_tokens(text)
        if token not in STOP_WORDS and len(token) <= MAX_TERM_CHARS
    )


def _fts_phrase(token: str) -> str:
    # Tokens are letters and digits only (word_tokens), so quoting is exact.
    return '"' + token + '"'


def _fts_any(keys: Sequence[str], terms: Sequence[str]) -> str:
    return " OR ".join(_fts_phrase(key + term) for key in keys for term in terms)


# -- keeping the index in step --------------------------------------------------


def index_records(rows: Iterable[tuple[int, str, str, str]]) -> None:
    """Add ``(pk, record_id, scope, content)`` rows; call when a record becomes active.

    The vector index (:mod:`memory.vectors`) is filled in the same call, so
    every path that makes a record recallable gives it both entries.
    """
    rows = list(rows)
    if not rows:
        return
    vectors.index_records(rows)
    with connection.cursor() as cursor:
        if connection.vendor == "sqlite":
            cursor.executemany(
                # REPLACE: a row left behind for the same id (a test database
                # flushed around the virtual table) is overwritten, never kept.
                "INSERT OR REPLACE INTO memory_record_fts(rowid, terms, record_id) VALUES (%s, %s, %s)",
                [
                    (pk, scoped_terms(scope, content), record_id)
                    for pk, record_id, scope, content in rows
                ],
            )
        else:
            execute_rows(
                cursor,
                "INSERT INTO memory_record_fts(record_pk, record_id, scope, document) "
                "VALUES (%s, %s, %s, to_tsvector('english', %s)) "
                "ON CONFLICT (record_pk) DO UPDATE SET record_id = EXCLUDED.record_id, "
                "scope = EXCLUDED.scope, document = EXCLUDED.document",
                [(pk, record_id, scope, content) for pk, record_id, scope, content in rows],
            )


def unindex_records(pks: Sequence[int]) -> None:
    """Remove records from both indexes; call wherever a record stops being active."""
    if not pks:
        return
    vectors.unindex_records(pks)
    placeholders = ", ".join(["%s"] * len(pks))
    column = "rowid" if connection.vendor == "sqlite" else "record_pk"
    with connection.cursor() as cursor:
        cursor.execute(
            f"DELETE FROM memory_record_fts WHERE {column} IN ({placeholders})",  # noqa: S608  (placeholders only)
            list(pks),
        )


def indexed_pks(pks: Sequence[int]) -> set[int]:
    """Which of ``pks`` the index holds (for inspection and tests)."""
    if not pks:
        return set()
    placeholders = ", ".join(["%s"] * len(pks))
    column = "rowid" if connection.vendor == "sqlite" else "record_pk"
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT {column} FROM memory_record_fts WHERE {column} IN ({placeholders})",  # noqa: S608  (placeholders only)
            list(pks),
        )
        return {row[0] for row in cursor.fetchall()}


def index_size() -> int:
    with connection.cursor() as cursor:
        cursor.execute("SELECT COUNT(*) FROM memory_record_fts")
        return int(cursor.fetchone()[0])


# -- asking it -----------------------------------------------------------------


def search(
    *,
    visible_scopes: Sequence[str],
    terms: Sequence[str],
    limit: int,
    metadata: Mapping[str, Any] | None = None,
) -> list[IndexHit]:
    """Top ``limit`` active records in ``visible_scopes`` matching any of ``terms``.

    Best first by the index's own score, ties broken by newest record; each
    hit also says how many distinct query terms it contains. ``metadata``
    (checked by :func:`memory.metadata.check_filter`) keeps only records
    holding those typed values, inside the ranked query itself.
    """
    return lexical_matches(
        visible_scopes=visible_scopes, terms=terms, limit=limit, metadata=metadata
    ).hits


def lexical_matches(
    *,
    visible_scopes: Sequence[str],
    terms: Sequence[str],
    limit: int,
    metadata: Mapping[str, Any] | None = None,
) -> LexicalMatches:
    """:func:`search`'s hits with each word's posting count and the visible record count."""
    if not terms or not visible_scopes or limit <= 0:
        return LexicalMatches([], {}, 0)
    wanted = record_metadata.sql_condition("r", metadata or {})
    if connection.vendor == "sqlite":
        return _search_sqlite(visible_scopes, terms, limit, wanted)
    return _search_postgresql(visible_scopes, terms, limit, wanted)


# How many active records the visible scopes hold: BM25's N, from the
# per-scope counters the services keep in step (never a count of records).
_VISIBLE_SQL = "SELECT COALESCE(SUM(active), 0) FROM memory_scopestats WHERE scope IN ({marks})"


def _visible_count(cursor: Any, scopes: Sequence[str]) -> int:
    cursor.execute(_VISIBLE_SQL.format(marks=", ".join(["%s"] * len(scopes))), list(scopes))
    return int(cursor.fetchone()[0])


def _indexed_length(terms: str) -> int:
    """How many words the SQLite index holds for a record (its stored ``terms``)."""
    return len(terms.split())


# A query word found in more records than this (in the visible scopes) is
# "common": in a dense scope ("project", "codename" in every record) it tells
# records apart hardly at all, yet ranking every record that holds it would
# make recall cost grow with the scope. See _search_sqlite.
COMMON_POSTINGS = 2000

# Whether a word is common is a statistic of the whole visible corpus, and in
# a busy scope the answer for "project" or "budget" is the same from one
# recall to the next: counting it again cost 1.5 ms a recall on SQLite and
# 6.5 ms on PostgreSQL at 100k records. Each process remembers the words it
# found common for POSTINGS_TTL_SECONDS, keyed by a digest of the scopes and
# the word (no query text is kept). Only "common" is remembered: a rare or
# absent word is counted again every time, so a record just remembered is
# found by its words at once. A stale "common" (after a forget of thousands
# of records) only changes which words rank the candidates; what a recall may
# return is still decided by the index query and its scope and status
# filters, which always run.
POSTINGS_TTL_SECONDS = 60.0
POSTINGS_CACHE_SIZE = 4096


class _PostingCounts:
    """A small LRU of (scopes, word) -> posting count of the common words, per process, with a TTL."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._entries: OrderedDict[bytes, tuple[float, int]] = OrderedDict()

    @staticmethod
    def key(vendor: str, scopes: Sequence[str], term: str) -> bytes:
        digest = hashlib.sha256(vendor.encode())
        for part in (*scopes, "\x00", term):
            digest.update(part.encode("utf-8", "replace") + b"\x1f")
        return digest.digest()

    def counts(
        self,
        vendor: str,
        scopes: Sequence[str],
        terms: Sequence[str],
        count: Callable[[list[str]], list[int]],
    ) -> dict[str, int]:
        """Each term's posting count: cached if the word was found common lately, else counted.

        The words not cached are counted together by one ``count(words)``
        call (one statement); those found common are kept.
        """
        keys = {term: self.key(vendor, scopes, term) for term in terms}
        now = time.monotonic()
        found: dict[str, int] = {}
        with self._lock:
            for term, key in keys.items():
                entry = self._entries.get(key)
                if entry is not None and now - entry[0] < POSTINGS_TTL_SECONDS:
                    self._entries.move_to_end(key)
                    found[term] = entry[1]
        missing = [term for term in keys if term not in found]
        if not missing:
            return found
        counted = dict(zip(missing, count(missing), strict=True))
        found.update(counted)
        common = [(keys[term], value) for term, value in counted.items() if value > COMMON_POSTINGS]
        if common:
            with self._lock:
                for key, value in common:
                    self._entries[key] = (now, value)
                    self._entries.move_to_end(key)
                while len(self._entries) > POSTINGS_CACHE_SIZE:
                    self._entries.popitem(last=False)
        return found

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()


posting_counts = _PostingCounts()


# One word's posting count, up to the cap (a doclist read that stops early).
_SQLITE_POSTINGS = (
    "(SELECT COUNT(*) FROM (SELECT rowid FROM memory_record_fts "
    "WHERE memory_record_fts MATCH %s LIMIT %s))"
)
_PG_POSTINGS = (
    "(SELECT COUNT(*) FROM (SELECT 1 FROM memory_record_fts f "
    "WHERE f.scope = ANY(%s) AND f.document @@ plainto_tsquery('english', %s) LIMIT %s) m)"
)


def _count_each(
    cursor: Any, head: str, one_word: str, params: Sequence[tuple[Any, ...]]
) -> list[int]:
    """One posting count per word, in one statement: ``head`` then a ``one_word`` sub-select each."""
    cursor.execute(
        head + ", ".join([one_word] * len(params)), [value for row in params for value in row]
    )
    return [int(value) for value in cursor.fetchone()]


def _search_sqlite(
    visible_scopes: Sequence[str],
    terms: Sequence[str],
    limit: int,
    wanted: tuple[str, list[Any]] = ("1 = 1", []),
) -> LexicalMatches:
    condition, condition_params = wanted
    keys = [scope_key(scope) for scope in visible_scopes]
    scope_marks = ", ".join(["%s"] * len(visible_scopes))
    with connection.cursor() as cursor:
        # How many records hold each word, up to the cap, every word in one statement.
        def count(words: list[str]) -> list[int]:
            return _count_each(
                cursor,
                "SELECT ",
                _SQLITE_POSTINGS,
                [(_fts_any(keys, [word]), COMMON_POSTINGS + 1) for word in words],
            )

        postings = posting_counts.counts("sqlite", visible_scopes, terms, count)
        present = [term for term in terms if postings[term]]
        if not present:
            return LexicalMatches([], postings, 0)
        visible = _visible_count(cursor, visible_scopes)
        rare = [term for term in present if postings[term] <= COMMON_POSTINGS]
        join = (
            "JOIN memory_record r ON r.id = f.rowid AND r.record_id = f.record_id "
            f"WHERE memory_record_fts MATCH %s AND r.status = 'active' AND r.scope IN ({scope_marks}) "
            f"AND {condition} "
        )
        if not rare:
            hits = _newest_common_matches(
                cursor, keys, present, limit, join, [*visible_scopes, *condition_params]
            )
            return LexicalMatches(hits, postings, visible)
        # The candidate pool: ranked by the rare words only, whose postings
        # bound the work. rank is FTS5's bm25 (lower is better; its word
        # weights are per scope, since every indexed word carries its scope's
        # prefix); recall weighs the pool again by every present word
        # (memory.ranking.bm25). The join re-checks status, scope and
        # identity on the record row itself.
        cursor.execute(
            f"SELECT f.rowid, f.record_id, -f.rank, f.terms FROM memory_record_fts f {join}"  # noqa: S608  (placeholders only)
            "ORDER BY f.rank, f.rowid DESC LIMIT %s",
            [_fts_any(keys, rare), *visible_scopes, *condition_params, limit],
        )
        rows = cursor.fetchall()
        if not rows:
            return LexicalMatches([], postings, visible)
        # Asked for the candidates only: bounded by the candidate list.
        pks = [row[0] for row in rows]
        held = _words_held(
            cursor, keys, present, pks, (f"rowid IN ({', '.join(['%s'] * len(pks))})", pks)
        )
    hits = [
        IndexHit(
            pk,
            record_id,
            float(raw),
            len(held[pk]),
            frozenset(held[pk]),
            _indexed_length(indexed),
        )
        for pk, record_id, raw, indexed in rows
    ]
    return LexicalMatches(hits, postings, visible)


def _words_held(
    cursor: Any,
    keys: Sequence[str],
    present: Sequence[str],
    pks: Sequence[int],
    rowids: tuple[str, Sequence[Any]],
) -> dict[int, set[str]]:
    """Which of the ``present`` words each of ``pks`` holds: one MATCH per word over ``rowids``.

    ``rowids`` is a condition on the full-text rowid (and its parameters)
    that takes in every one of ``pks``. Every candidate came from a MATCH on
    some of these words, so with one word present each holds it.
    """
    if len(present) == 1:
        return {pk: {present[0]} for pk in pks}
    held: dict[int, set[str]] = {pk: set() for pk in pks}
    condition, params = rowids
    # One MATCH per word (each reads only its own word's postings), all in
    # one statement: a row per (word, record holding it).
    branch = (
        f"SELECT %s, rowid FROM memory_record_fts WHERE memory_record_fts MATCH %s AND {condition}"  # noqa: S608  (placeholders only)
    )
    cursor.execute(
        " UNION ALL ".join([branch] * len(present)),
        [
            value
            for index, term in enumerate(present)
            for value in (index, _fts_any(keys, [term]), *params)
        ],
    )
    for index, pk in cursor.fetchall():
        if pk in held:
            held[pk].add(present[int(index)])
    return held


def _newest_common_matches(
    cursor: Any,
    keys: Sequence[str],
    present: Sequence[str],
    limit: int,
    join: str,
    join_params: list[Any],
) -> list[IndexHit]:
    """Only common words (SQLite): the newest COMMON_POSTINGS matches, those holding most of the words first.

    Not FTS5's bm25 here: to weigh a word it counts every record holding it,
    so ranking even a few rows by common words read all their postings (69
    ms a recall at a million records, against 2 ms to walk the newest
    matches). Among words that every record holds the weights barely differ;
    how many of the query's words a record holds is what tells them apart,
    and it is the hit's raw score. FTS5 walks rowids newest first; the words
    are counted over the window's rowid range, which holds only the window's
    matches (anything newer or in between that matches is in the window).
    """
    cursor.execute(
        f"SELECT f.rowid, f.record_id, f.terms FROM memory_record_fts f {join}"  # noqa: S608  (placeholders only)
        "ORDER BY f.rowid DESC LIMIT %s",
        [_fts_any(keys, present), *join_params, COMMON_POSTINGS],
    )
    window = cursor.fetchall()
    if not window:
        return []
    held = _words_held(
        cursor,
        keys,
        present,
        [pk for pk, _record_id, _terms in window],
        ("rowid BETWEEN %s AND %s", [window[-1][0], window[0][0]]),
    )
    best = sorted(window, key=lambda row: (-len(held[row[0]]), -row[0]))[:limit]
    return [
        IndexHit(
            pk,
            record_id,
            float(len(held[pk])),
            len(held[pk]),
            frozenset(held[pk]),
            _indexed_length(indexed),
        )
        for pk, record_id, indexed in best
    ]


def _search_postgresql(
    visible_scopes: Sequence[str],
    terms: Sequence[str],
    limit: int,
    wanted: tuple[str, list[Any]] = ("1 = 1", []),
) -> LexicalMatches:
    scopes = list(visible_scopes)
    condition, condition_params = wanted
    with connection.cursor() as cursor:
        # As on SQLite: words in more than COMMON_POSTINGS visible records do
        # not get every such record ranked (see _search_sqlite).
        def count(words: list[str]) -> list[int]:
            return _count_each(
                cursor,
                CUSTOM_PLAN + "SELECT ",
                _PG_POSTINGS,
                [(scopes, word, COMMON_POSTINGS + 1) for word in words],
            )

        postings = posting_counts.counts("postgresql", scopes, terms, count)
        present = [term for term in terms if postings[term]]
        if not present:
            return LexicalMatches([], postings, 0)
        visible = _visible_count(cursor, scopes)
        rare = [term for term in present if postings[term] <= COMMON_POSTINGS]
        ranked = rare or present
        query_sql = " || ".join(["plainto_tsquery('english', %s)"] * len(ranked))
        # The pool is ordered by BM25 over the ranked words with each word's
        # presence (ts_rank knows no word rarity); the average length is the
        # matching records'. memory.ranking.bm25 weighs the pool again in Python.
        held_sql = ", ".join(["(c.document @@ plainto_tsquery('english', %s))"] * len(present))
        weight = ranking.bm25_weights(postings, visible)
        score_sql = " + ".join(
            ["%s * (c.document @@ plainto_tsquery('english', %s))::int"] * len(ranked)
        )
        # Only common words: the newest COMMON_POSTINGS matches are ranked.
        window = "" if rare else "ORDER BY f.record_pk DESC LIMIT %s"
        # The record row is joined on its primary key alone. Joined on the
        # record ID too, the planner estimated one row for the join and, for
        # the window above, hashed every visible record and sorted them all
        # (280 ms at 100k records, against 4 ms walking the newest matches
        # backwards); PostgreSQL never reuses a primary key, and recall
        # re-checks each candidate's record ID against this row anyway.
        cursor.execute(
            CUSTOM_PLAN + f"SELECT c.record_pk, c.record_id, ({score_sql}) / "  # noqa: S608  (placeholders only)
            f"(1 + %s * (1 - %s + %s * c.length / GREATEST(c.average, 1))), c.length, {held_sql} "
            # The average length is taken outside the matching query: a
            # window function inside it is computed before its LIMIT, so
            # the common-words window would read every match (201 ms at
            # 100k records, against the window's own few ms).
            "FROM (SELECT m.*, avg(m.length) OVER () AS average FROM ("
            "SELECT f.record_pk, f.record_id, f.document, length(f.document) AS length "
            f"FROM (SELECT ({query_sql}) AS query) q, memory_record_fts f "
            "JOIN memory_record r ON r.id = f.record_pk "
            f"WHERE f.scope = ANY(%s) AND r.status = 'active' AND f.document @@ q.query "
            f"AND {condition} {window}) m) c "
            "ORDER BY 3 DESC, c.record_pk DESC LIMIT %s",
            [
                *[value for term in ranked for value in (weight[term], term)],
                ranking.BM25_K1,
                ranking.BM25_B,
                ranking.BM25_B,
                *present,
                *ranked,
                scopes,
                *condition_params,
                *([] if rare else [COMMON_POSTINGS]),
                limit,
            ],
        )
        rows = cursor.fetchall()
    hits = []
    for pk, record_id, raw, length, *flags in rows:
        held = frozenset(term for term, flag in zip(present, flags, strict=True) if flag)
        hits.append(IndexHit(pk, record_id, float(raw), len(held), held, int(length)))
    return LexicalMatches(hits, postings, visible)
