"""Deterministic extraction: generic sentence shapes to candidate facts (memory-engine.md).

No model, no network, and no vocabulary list: every rule here is a sentence
shape ("my X is Y", "use Y as my X", "remember that ...", "I avoid Z") built
from closed-class words (pronouns, copulas, question words, discourse
markers), so the rules work on words they have never seen. Tests exercise
them with vocabulary that appears nowhere else.

Also here: where a message's untrusted content is (``<webpage>``, ``<tool…>``
blocks), content normalisation for duplicate detection, and turning a spoken
forget request into a needle.
"""

from __future__ import annotations

import hashlib
import re
import unicodedata
from dataclasses import dataclass

from memory.errors import ExtractionError, SelectorError
from memory.limits import MAX_KEY_CHARS, MAX_VALUE_CHARS
from memory.models import SourceType

UNTRUSTED_CONFIDENCE_CAP = 0.3

# -- where third-party content is ------------------------------------------

# An unclosed block runs to the end of the message: when in doubt, more text
# is treated as untrusted, never less.
_WEBPAGE_BLOCK = re.compile(
    r"<(?P<tag>web_?page)\b[^>]*>(?P<body>.*?)(?:</(?P=tag)\s*>|\Z)", re.IGNORECASE | re.DOTALL
)
_TOOL_BLOCK = re.compile(
    r"<(?P<tag>tool[a-z0-9_-]*)\b[^>]*>(?P<body>.*?)(?:</(?P=tag)\s*>|\Z)",
    re.IGNORECASE | re.DOTALL,
)

CALLER_SOURCE_TYPES = (SourceType.USER_MESSAGE, SourceType.WEBPAGE, SourceType.TOOL_OUTPUT)


@dataclass(frozen=True)
class SourceReading:
    """What a message is: its source type, whether it is trusted, and what to extract from."""

    source_type: str
    trusted: bool
    texts: tuple[str, ...]


def embedded_blocks(text: str) -> tuple[str, list[str]]:
    """Return (detected source type or "", bodies of every embedded third-party block)."""
    webpages = [m.group("body") for m in _WEBPAGE_BLOCK.finditer(text)]
    tools = [m.group("body") for m in _TOOL_BLOCK.finditer(text)]
    if webpages:
        return SourceType.WEBPAGE, webpages + tools
    if tools:
        return SourceType.TOOL_OUTPUT, tools
    return "", []


def read_source(text: str, stated: str | None = None) -> SourceReading:
    """Classify a message. A caller may state an untrusted source, never downgrade one."""
    if stated is not None and stated not in CALLER_SOURCE_TYPES:
        allowed = ", ".join(CALLER_SOURCE_TYPES)
        raise ExtractionError(f"unknown source type {stated!r}: use one of {allowed}")
    detected, blocks = embedded_blocks(text)
    if detected:
        source_type = stated if stated and stated != SourceType.USER_MESSAGE else detected
        return SourceReading(source_type, False, tuple(b.strip() for b in blocks if b.strip()))
    if stated and stated != SourceType.USER_MESSAGE:
        return SourceReading(stated, False, (text.strip(),))
    return SourceReading(SourceType.USER_MESSAGE, True, (text,))


# -- normalisation ------------------------------------------------------------

_WORD = re.compile(r"[^\W_]+")


def word_tokens(text: str) -> list[str]:
    return _WORD.findall(text.lower())


def normalise_content(text: str) -> str:
    """Lower case, word tokens, single spaces: what "the same content" means."""
    return " ".join(word_tokens(text))


def content_digest(text: str) -> str:
    return hashlib.sha256(normalise_content(text).encode("utf-8")).hexdigest()


def normalise_key(key: str) -> str:
    """A fact slot name: lower case, single spaces."""
    return " ".join(key.lower().split())


# -- sentence shapes -----------------------------------------------------------

_QUESTION_WORDS_TEXT = (
    "am are is do does did can could should would will what which who where when why how"
)
QUESTION_WORDS = frozenset(_QUESTION_WORDS_TEXT.split())
# Discourse markers that may open a statement without changing it.
_OPENER = r"(?:(?:and|also|oh|btw|fyi|ok|okay|so|well|actually|now|hi|hey|by the way|just so you know|for the record|for reference|note)\b[\s,:;!-]*)*"
_KEY_WORDS = r"[^\W_][\w'./+&-]*(?:\s+[^\W_][\w'./+&-]*){0,5}?"
_KEY = rf"(?P<key>{_KEY_WORDS})"
_KEY_SHAPE = re.compile(_KEY_WORDS)
# Temporal fillers and politeness that say when or how a fact is stated, never
# what it is: they are dropped from either end of a value ("... is Y now" ->
# "Y"). Stripped word by word (_drop_temporal), never by a trailing regex
# group, so a long run of them costs linear time.
_TEMPORAL_PHRASES = tuple(
    tuple(phrase.split())
    for phrase in (
        "going forward",
        "from now on",
        "for now",
        "from today",
        "as of now",
        "as of today",
        "right now",
        "these days",
        "at the moment",
        "at present",
        "nowadays",
        "currently",
        "now",
        "instead",
        "anymore",
        "please",
    )
)

_SLOT = re.compile(
    rf"^{_OPENER}my\s+{_KEY}\s+(?P<verb>is|are)\s+(?P<value>.+)$",
    re.IGNORECASE | re.DOTALL,
)
_USE_AS = re.compile(
    rf"^{_OPENER}(?:(?:please|going forward|from now on)\b[\s,]*)*use\s+(?P<value>.+?)\s+as\s+my\s+(?P<rest>.+)$",
    re.IGNORECASE | re.DOTALL,
)
# "remember that ..." and its siblings ("note that", "keep in mind that",
# "don't forget that"); without "that" only when the user is the subject
# next, so "remember to buy ..." (a reminder request) stays out.
_REMEMBER_THAT = re.compile(
    rf"^{_OPENER}(?:please\s+)?(?:remember|note|keep\s+in\s+mind|bear\s+in\s+mind|"
    r"don['\u2019]?t\s+forget|do\s+not\s+forget)"
    r"(?:\s+that\s+|\s*[:,]\s*|\s+(?=(?:my|i|i['\u2019]m|i['\u2019]ve|i['\u2019]d|i['\u2019]ll|we|our)\b))"
    r"(?P<inner>.+)$",
    re.IGNORECASE | re.DOTALL,
)
_AVOID = re.compile(
    rf"^{_OPENER}I\s+(?:avoid|never\s+eat|don['\u2019]?t\s+eat|do\s+not\s+eat|dislike)\s+(?P<what>.+)$",
    re.IGNORECASE | re.DOTALL,
)
_FORGET_REQUEST = re.compile(
    r"^(?:(?:please|can you|could you|would you|will you)\b[\s,]*)*"
    r"(?:forget|unlearn|stop remembering|(?:delete|erase|remove|drop)\s+(?:my|that|what|the fact|everything|all)\b)",
    re.IGNORECASE,
)
_KEY_STOP = frozenset({"is", "are"})
_CLAUSE_END = re.compile(
    r"\s*[,;:()]\s*|\s+(?:but|because|since|unless|although|though|so|which|as)\s+", re.IGNORECASE
)


@dataclass(frozen=True)
class Correction:
    """What a correction or negation replaces, found by the store among the scope's records.

    ``positive``: the exact content it negates ("User is no longer X." replaces
    "User is X."). ``wrong``/``right``: "right, not wrong" ("..., not Y"); the
    corrected record is the newest one holding ``wrong`` and every word of
    ``about``, and its content is kept with ``wrong`` replaced by ``right``.
    """

    positive: str = ""
    wrong: str = ""
    right: str = ""
    about: tuple[str, ...] = ()


@dataclass(frozen=True)
class Candidate:
    """A fact the extractor found: content, slot (``""`` when unkeyed), confidence, rule."""

    content: str
    fact_key: str
    confidence: float
    rule: str
    correction: Correction | None = None


_SENTENCE_END = re.compile(r"(?P<end>[.!?])\s+")
_ABBREVIATION = re.compile(r"(?:^|\s)[A-Z][a-z]?\.$")


def split_sentences(text: str) -> list[str]:
    """Lines, then sentence ends; a dot inside a token (an email, a version) is not an end."""
    sentences: list[str] = []
    for line in text.splitlines():
        start = 0
        for end in _SENTENCE_END.finditer(line):
            # An initial or a short title ("J.", "Dr.") does not end a sentence.
            # (Searched in the few characters before the dot: from the line's
            # start, every dot would rescan the line.)
            near = max(0, end.start() - 3)
            if end.group("end") == "." and _ABBREVIATION.search(line, near, end.start() + 1):
                continue
            sentences.append(line[start : end.start() + 1])
            start = end.end()
        sentences.append(line[start:])
    cleaned = (part.strip().lstrip("-*•>").strip() for part in sentences)
    return [part for part in cleaned if part]


_TERMINAL = frozenset(".!;,:\u2026")


def _strip_terminal(sentence: str) -> str:
    # A scan from the end, not a "[...]+$" regex search, which is quadratic
    # on a long run of punctuation in the middle of a 100,000-character text.
    end = len(sentence)
    while end and (sentence[end - 1].isspace() or sentence[end - 1] in _TERMINAL):
        end -= 1
    return sentence[:end]


# Subject pronouns that turn a leading "when"/"where" into a subordinate
# clause ("When I travel, I carry ...") rather than a question ("when is ...").
_CLAUSE_SUBJECTS = frozenset({"i", "im", "ive", "my", "we", "our"})


def is_question(sentence: str) -> bool:
    if sentence.rstrip().endswith("?"):
        return True
    words = word_tokens(sentence)
    if len(words) > 1 and words[0] in {"when", "where"} and words[1] in _CLAUSE_SUBJECTS:
        return False
    return bool(words) and words[0] in QUESTION_WORDS


def is_forget_request(sentence: str) -> bool:
    return bool(_FORGET_REQUEST.match(sentence.strip()))


def _phrases_by(position: int) -> dict[str, list[tuple[str, ...]]]:
    index: dict[str, list[tuple[str, ...]]] = {}
    for phrase in _TEMPORAL_PHRASES:
        index.setdefault(phrase[position], []).append(phrase)
    return index


_TEMPORAL_BY_FIRST = _phrases_by(0)
_TEMPORAL_BY_LAST = _phrases_by(-1)


def _temporal_length(words: list[str], start: int, end: int, at_end: bool) -> int:
    """How many words a temporal filler takes at the start (or end) of ``words[start:end]``."""
    edge = words[end - 1 if at_end else start].strip(",").lower()
    for phrase in (_TEMPORAL_BY_LAST if at_end else _TEMPORAL_BY_FIRST).get(edge, ()):
        size = len(phrase)
        if size > end - start:
            continue
        part = words[end - size : end] if at_end else words[start : start + size]
        if tuple(w.strip(",").lower() for w in part) == phrase:
            return size
    return 0


def _drop_temporal(text: str) -> str:
    """ "Y now" / "now Y" -> "Y": when a fact was said is the record's time, not its value."""
    words = _strip_terminal(text).split()
    start, end = 0, len(words)
    while start < end and (size := _temporal_length(words, start, end, at_end=False)):
        start += size
    while start < end and (size := _temporal_length(words, start, end, at_end=True)):
        end -= size
    return _strip_terminal(" ".join(words[start:end]))


def _clean_value(value: str) -> str:
    return _drop_temporal(" ".join(value.split()))


def _display_key(key: str) -> str:
    return " ".join(key.split())


def _valid_key(key: str) -> bool:
    words = normalise_key(key).split()
    return bool(words) and not (_KEY_STOP & set(words)) and len(key) <= MAX_KEY_CHARS


def _slot_candidate(sentence: str, confidence: float, rule: str) -> Candidate | None:
    match = _USE_AS.match(sentence)
    slot = _drop_temporal(match.group("rest")) if match else ""
    if match and _KEY_SHAPE.fullmatch(slot) and _valid_key(slot):
        value = _clean_value(match.group("value"))
        key = _display_key(slot)
        if value:
            return Candidate(f"User's {key} is {value}.", normalise_key(key), confidence, "use_as")
    match = _SLOT.match(sentence)
    if match and _valid_key(match.group("key")):
        value = _clean_value(match.group("value"))
        key = _display_key(match.group("key"))
        verb = match.group("verb").lower()
        if value:
            return Candidate(f"User's {key} {verb} {value}.", normalise_key(key), confidence, rule)
    return None


# -- which attribute a value states ---------------------------------------------------
#
# "My <X> is 7." and "My <X> is at <place> until 3pm." share the slot X but say
# different things about it (how many, where); only a value of the same
# attribute replaces the old one. The attribute is read from the value's
# grammatical shape (a time, a place phrase, a number, "a/an" + noun, a
# participle, a proper name), from closed-class words only: never from what
# the value is about.

_WEEKDAYS = r"(?:mon|tues|wednes|thurs|fri|satur|sun)day"
_MONTHS = (
    r"(?:jan(?:uary)?|feb(?:ruary)?|mar(?:ch)?|apr(?:il)?|may|june?|july?|aug(?:ust)?|"
    r"sep(?:t(?:ember)?)?|oct(?:ober)?|nov(?:ember)?|dec(?:ember)?)"
)
_TIME_OF = (
    rf"(?:\d{{1,2}}(?::\d{{2}})?\s*(?:am|pm|a\.m\.|p\.m\.|h|o'?clock)\b|\d{{1,2}}:\d{{2}}\b|noon\b|midnight\b|"
    rf"{_WEEKDAYS}s?\b|{_MONTHS}\b\.?\s*\d|\d{{1,2}}(?:st|nd|rd|th)?\s+(?:of\s+)?{_MONTHS}\b|\d{{4}}-\d{{2}}-\d{{2}}\b|"
    r"today\b|tonight\b|tomorrow\b|yesterday\b|(?:next|last|this)\s+(?:week|month|year|weekend|morning|evening)\b|"
    r"the\s+\d{1,2}(?:st|nd|rd|th)\b)"
)
_TIME_VALUE = re.compile(
    rf"^(?:(?:at|on|by|until|till|from|before|after|around|about|due|scheduled\s+for|set\s+for|"
    rf"(?:next|this|last)|in\s+the)\s+)*{_TIME_OF}",
    re.IGNORECASE,
)
_PLACE_VALUE = re.compile(
    r"^(?:still\s+)?(?:in|at|on|inside|outside|near|under|behind|above|below|beside|between|"
    r"next\s+to|across|over|by|with|from|back\s+in|away\s+in|off\s+to|home)\b",
    re.IGNORECASE,
)
_NUMBER_WORDS_TEXT = (
    "one two three four five six seven eight nine ten eleven twelve thirteen fourteen "
    "fifteen sixteen seventeen eighteen nineteen twenty thirty forty fifty sixty seventy "
    "eighty ninety hundred"
)
_NUMBER_WORDS = frozenset(_NUMBER_WORDS_TEXT.split())
_AMOUNT_VALUE = re.compile(
    r"^(?:about\s+|around\s+|almost\s+|nearly\s+|over\s+)?[$€£]?\d[\d.,]*\b", re.IGNORECASE
)
_STATE_VALUE = re.compile(
    r"^(?:(?:still|now|already|just|very|really|so|a\s+bit|totally|not)\s+)*"
    r"[a-z]{3,}(?:ed|ing)"
    r"(?:\s+(?:again|today|now|late|early|behind|off|out|up|down|over|by\s+.+|for\s+.+|until\s+.+))?$",
    re.IGNORECASE,
)


def value_attribute(value: str) -> str:
    """Which attribute of a keyed entity ``value`` states: time, place, amount, kind, state, name or value."""
    text = _strip_terminal(" ".join(value.split()))
    words = word_tokens(text)
    if not words:
        return "value"
    if _TIME_VALUE.match(text):
        return "time"
    if _PLACE_VALUE.match(text):
        return "place"
    # The first whitespace-separated word, not the first token: "a@example.com"
    # starts with the token "a" but is no "a/an" + noun.
    first = text.split()[0].lower()
    if _AMOUNT_VALUE.match(text) or first in _NUMBER_WORDS:
        return "amount"
    if first in ("a", "an"):
        return "kind"
    if _STATE_VALUE.match(text):
        return "state"
    if (
        all(part[:1].isupper() for part in text.split() if part[:1].isalpha())
        and text[:1].isupper()
    ):
        return "name"
    return "value"


_STORED_SLOT = re.compile(r"^User's\s+.+?\s+(?:is|are)\s+(?P<value>.+)$", re.DOTALL)
_STORED_EXPLICIT = re.compile(r"^[^:]+:\s+(?P<value>.+)$", re.DOTALL)


def stored_value(content: str) -> str:
    """The value part of a keyed record's content ("User's X is Y." or "X: Y")."""
    match = _STORED_SLOT.match(content) or _STORED_EXPLICIT.match(content)
    return match.group("value") if match else content


def same_attribute(new_content: str, held_content: str) -> bool:
    """Whether two keyed contents of one slot state the same attribute (so one replaces the other)."""
    return value_attribute(stored_value(new_content)) == value_attribute(stored_value(held_content))


# -- the third-person rewrite -----------------------------------------------------


def _closed_class(words: str) -> frozenset[str]:
    """A closed word class written as one readable block of text."""
    return frozenset(words.split())


# Closed-class verb forms only: auxiliaries, modals, and the irregular past
# tenses, which take no "-s" after "User".
_IRREGULAR = {
    "am": "is",
    "have": "has",
    "haven't": "hasn't",
    "haven\u2019t": "hasn\u2019t",
    "havent": "hasnt",
    "do": "does",
    "don't": "doesn't",
    "don\u2019t": "doesn\u2019t",
    "dont": "doesnt",
    "go": "goes",
}
_UNINFLECTED = _closed_class(
    """was were can could will would shall should may might must cannot cant wont didnt
    wasnt couldnt wouldnt shouldnt aint did had used got went made took saw began spent
    left met lost broke fell came became knew wrote ran swam ate drank bought taught
    thought brought sold told felt kept slept built sent won quit put read grew gave
    found heard held led paid said sat stood understood woke wore forgot chose drove
    rode flew fought hid hurt let set shut split spread struck swore threw meant sang
    dealt lent bent dug hung caught sought fed bled sped bred dreamt learnt spelt burnt
    knelt leapt lit slid spun stuck stung swung wept wound bore tore shook forgave rose
    hit cut cost beat bet"""
)
# Adverbs that may sit between "I" and its verb ("I usually go"): the verb
# after them is the one that agrees.
_MID_ADVERB = (
    r"(?:always|never|usually|often|sometimes|rarely|seldom|also|still|just|really|only|"
    r"mostly|normally|generally|typically|occasionally|regularly|hardly|actually|"
    r"definitely|absolutely|currently|already|even|no longer|now|probably|frequently|"
    r"constantly|mainly|mostly|basically|honestly|truly|strongly|totally|completely|"
    # "once", "ever", and any "-ly" word (morphology, not a word list; "apply",
    # "reply", "supply" and "rely" are verbs, so no "ply" and at least five letters).
    r"once|twice|ever|[a-z]{2,}[a-oq-z]ly)"
)


_PRESENT_IN_ED = _closed_class(
    "need feed bleed breed speed exceed proceed succeed heed weed seed shred embed"
)


def _third_person_verb(verb: str) -> str:
    lower = verb.lower()
    if lower in _IRREGULAR:
        return _IRREGULAR[lower]
    # A regular past ("moved", "agreed") stays; "need", "feed", "exceed" are present.
    past = lower.endswith("ed") and len(lower) > 4 and lower not in _PRESENT_IN_ED
    if lower in _UNINFLECTED or not lower.isalpha() or past:
        return verb
    if re.search(r"(s|sh|ch|x|z|o)$", lower):
        return verb + "es"
    if re.search(r"[^aeiou]y$", lower):
        return verb[:-1] + "ies"
    return verb + "s"


# Every way the user refers to themselves in the first person singular. A
# lowercase "i" counts ("i live in ..."), but not the "i" of "i.e.".
_SELF_REFERENCE = re.compile(
    r"(?P<contraction>\b[Ii]['\u2019](?P<tail>m|ve|ll|d)\b|^(?P<bare>[Ii]m|[Ii]ve)\b)"
    rf"|(?P<subject>\b[Ii]\b(?![.'\u2019]\w))(?P<verb>(?P<adverbs>(?:\s+{_MID_ADVERB}\b)*)\s+(?P<word>[A-Za-z'\u2019]+))?"
    r"|(?P<possessive>\b[Mm]y\b)|(?P<mine>\b[Mm]ine\b)|(?P<reflexive>\b[Mm]yself\b)|(?P<object>\b[Mm]e\b)",
)
_PARTICIPLES = _closed_class(
    """been broken taken eaten given seen gone done known written driven ridden
    forgotten chosen spoken stolen fallen grown flown drawn shown better"""
)
_NEXT_VERB = re.compile(rf"(?:\s+{_MID_ADVERB}\b)*\s+(?P<word>[A-Za-z]+)\b", re.IGNORECASE)


def _had_follows(text: str, at: int) -> bool:
    """After "I'd", a participle ("broken", a regular "moved") means "had", not "would"."""
    following = _NEXT_VERB.match(text, at)
    if not following:
        return False
    word = following.group("word").lower()
    return word in _PARTICIPLES or (
        word.endswith("ed") and len(word) > 4 and word not in _PRESENT_IN_ED
    )


_CONTRACTED = {"m": "User is", "ve": "User has", "ll": "User will", "d": "User would"}
# "My <person> and I have ...": "I" inside a compound subject keeps the plural verb.
_COMPOUND_SUBJECT = re.compile(r"^(?P<np>(?:(?![Ii]\b)[^\s,;.]+\s+){1,4}?)and\s+[Ii]\b", re.DOTALL)
# Where one clause ends and the next begins: a possessive after a boundary
# names the user again ("... and User's key is ...") instead of "their".
_CLAUSE_BOUNDARY = re.compile(
    r"[,;:]|\b(?:and|but|or|so|because|since|while|whereas|although|though|when)\b",
    re.IGNORECASE,
)


# "User has X and wear a Y": a second verb joined to the user's by "and"/"or"
# agrees too, when the first one took an "-s" (not after a modal or a past:
# "User can't swim and hate ...") and an article or possessive follows it (so
# it is a verb with an object, not a noun in a list). The look-back is
# bounded to one clause.
_COORDINATED_VERB = re.compile(
    rf"(?P<head>\bUser(?:\s+{_MID_ADVERB})*\s+(?P<first>[A-Za-z'\u2019]+)\b[^,;.:]{{0,80}}?\s(?:and|or)\s+"
    rf"(?:{_MID_ADVERB}\s+)?)(?P<verb>[a-z]+)(?=\s+(?:a|an|the|their|his|her|its|our|some|them|it|User's|"
    r"up|out|down|off|back|away)\b)"
    # ... but not a noun before an article-led adverbial ("... and Y the most").
    r"(?!\s+(?:the\s+(?:most|best|least|same|whole|other)|a\s+(?:lot|bit|little|few|couple|day|week|month|year))\b)"
)


def _agree_coordinated(m: re.Match[str]) -> str:
    verb = m.group("verb")
    if verb in _IRREGULAR and verb not in ("be", "am") and m.group("first").endswith("s"):
        # "User is a <X> and do <their> ...": "do", "have", "go" before an object agree too.
        return m.group("head") + _IRREGULAR[verb]
    closed = _NO_FACT | _DECLARATIVE_OPENERS | _IMPERATIVE_OBJECTS | _SELF | _UNINFLECTED
    if (
        not m.group("first").endswith("s")
        or verb in closed
        or verb.endswith(("s", "ing", "ly"))
        or (verb.endswith("ed") and verb not in _PRESENT_IN_ED)
    ):
        return m.group(0)
    return m.group("head") + _third_person_verb(verb)


def third_person(text: str) -> str:
    """Rewrite a first-person statement about the user in the third person.

    The user is "User" the first time in a clause; a later possessive or
    reflexive in the same clause is "their"/"themselves" ("User takes their
    <thing> ..."), because "User takes User's <thing>" is not English.
    """
    text = " ".join(text.split())
    compound = _COMPOUND_SUBJECT.match(text)
    # Position of the end of the last mention of the user (None: not yet).
    last: list[int | None] = [None]
    frozen_subject = compound.end() if compound else -1

    def same_clause(at: int) -> bool:
        mention = last[0]
        return mention is not None and not _CLAUSE_BOUNDARY.search(text, mention, at)

    def rewrite(m: re.Match[str]) -> str:
        start = m.start()
        later = same_clause(start)
        last[0] = m.end()
        if m.group("bare"):
            return "User is" if m.group("bare").lower() == "im" else "User has"
        if m.group("contraction"):
            tail = m.group("tail").lower()
            if tail == "d" and _had_follows(text, m.end()):
                return "User had"  # "I'd broken ...", "I'd been ...": had, not would
            return _CONTRACTED[tail]
        if m.group("subject"):
            if not m.group("verb") or m.end("subject") == frozen_subject:
                return "User" + (m.group("verb") or "")
            return "User" + m.group("adverbs") + " " + _third_person_verb(m.group("word"))
        if m.group("possessive"):
            return "their" if later else "User's"
        if m.group("mine"):
            return "theirs" if later else "User's"
        if m.group("reflexive"):
            return "themselves" if later else "User"
        return "User"

    out = _COORDINATED_VERB.sub(_agree_coordinated, _SELF_REFERENCE.sub(rewrite, text))
    out = _strip_terminal(out)
    if not out:
        return out
    return out[0].upper() + out[1:] + "."


# -- first-person statements ---------------------------------------------------------
#
# Everything a user states about themselves is kept: a sentence is a
# statement when the user is in it (I, me, my, we, our, ...), it says
# something beyond a reaction to the conversation, and it is not a question,
# a request to the assistant, or an imperative. All of it is decided from
# closed-class words (pronouns, determiners, auxiliaries, prepositions,
# discourse markers), never from what the statement is about.

# "im"/"ive" (a missing apostrophe) count only as a sentence's first word:
# elsewhere they are too often another language's word ("im Winter").
_BARE_CONTRACTIONS = frozenset({"im", "ive"})
_SINGULAR_SELF = frozenset({"i", "me", "my", "mine", "myself"})
_PLURAL_SELF = frozenset({"we", "us", "our", "ours", "ourselves"})
_SELF = _SINGULAR_SELF | _PLURAL_SELF
# Tokens that make the user (part of) a clause's subject: the pronouns
# anywhere, the possessives and "me" ("Me and my <person> ...") when they open it.
_SELF_SUBJECT_PRONOUNS = frozenset({"i", "we"})
_SELF_SUBJECT = _SELF_SUBJECT_PRONOUNS | {"my", "our", "mine", "ours", "me"}
# A sentence about "you" is about the assistant, or is a request to it.
_ADDRESSEE = frozenset({"you", "your", "yours", "yourself", "yourselves", "u", "ur", "ya"})
# Words that can open a declarative sentence before its subject: determiners,
# pronouns, quantifiers, prepositions, subordinators, time and frequency
# words. A sentence that opens with anything else followed by an object
# ("Remind me", "Check my ...") is an imperative.
_DECLARATIVE_OPENERS = _closed_class(
    """a an the this that these those there it its he she they his her their one
    some any every each most many much all both no none several few other another
    on in at by for from with without during after before since until till as
    because when whenever while where once twice thrice if though although unless
    usually always often sometimes normally generally mostly rarely never last
    next today tonight yesterday tomorrow weekdays weekends mornings evenings"""
)
_IMPERATIVE_OBJECTS = _closed_class(
    """me us my our a an the this that these those it them him her some up out down
    off over back all everything something anything if whether what when where how
    who which why more less"""
)
_IMPERATIVE_HEADS = frozenset({"let", "lets", "please", "pls", "plz", "don", "dont", "do"})
# Closed-class words that carry no fact on their own, plus the phatic
# predicates of conversation ("I see", "I'm fine", "I love it", "I'm glad to
# hear that"): a sentence made only of these is a reaction, not a statement.
_NO_FACT = _closed_class(
    """a an the this that these those it its there here then now so too very really
    just quite pretty also still even not no yes yeah yep ok okay oh well sure
    m s t d ll ve re is am are was were be been being do does did done have has had
    will would shall should can could may might must to of in on at for with about
    from by up out and or but if as than then what which who how why when where
    see agree understand know think guess hope mean suppose believe wonder get got
    appreciate sorry fine good great alright right wrong ready back kidding joking
    glad happy hear love like thanks thank totally exactly absolutely definitely
    anyway anyways maybe perhaps probably lol haha hmm today tonight tomorrow
    yesterday later soon again yet anymore earlier moment testing checking asking
    wondering curious meant asked said listening following confused don doesn didn
    isn aren wasn weren won wouldn couldn shouldn haven hasn hadn cannot"""
)
_DEMONSTRATIVES = frozenset({"this", "that", "these", "those"})
# Auxiliaries that show a finite verb (so not an imperative) before an
# object "me"/"my" ("<Thing> gives me <effect>" has its "-s"; these cover
# "<Thing> has always kept me <state>").
_FINITE = _closed_class(
    """is are was were has have had does did can could will would should may might
    must isn aren wasn weren hasn haven hadn doesn didn won wouldn can cannot"""
)
# Discourse markers, greetings and lead-ins that may precede a statement.
_LEAD_IN = re.compile(
    r"^(?:(?:and|also|oh|ah|um|uh|hmm|wow|btw|fyi|ok|okay|so|well|actually|now|hi|hey|hello|"
    r"thanks|thank you|thx|yes|yeah|yep|no|nope|sure|alright|cool|great|nice|perfect|"
    r"awesome|interesting|sorry|(?:i['\u2019]m|i am) sorry|sounds (?:good|great|fine)|"
    r"got it|i see|honestly|"
    r"to be honest|good (?:morning|afternoon|evening)|by the way|just so you know|"
    r"just to let you know|for the record|for reference|for context|in case it matters|"
    r"as i (?:said|mentioned|told you)(?: before| earlier)?|"
    r"i (?:told|said|mentioned)(?: to)? you(?: before| earlier)?(?: that)?)\b[\s,:;!.-]*)+",
    re.IGNORECASE,
)
# "Background: ..." / "Health note - ...": a short label without the user in it.
_LABEL = re.compile(r"^(?P<label>[^\W\d_][\w ]{0,30}?)\s*[:\u2013\u2014-]\s+")
_HEDGE = re.compile(
    r"^i (?:think|guess|believe|suppose|reckon|feel like)(?: that)?\s+(?=\S)", re.IGNORECASE
)
# "..., so please keep that in mind" / "..., can you note that?": the request
# to remember is not part of the fact.
_REQUEST_TAIL = re.compile(
    r"(?:\s*[,;]\s*|\s+(?:so|and)\s+|\s*[-\u2013\u2014]\s*)(?:so\s+|and\s+)?"
    r"(?:(?:please|pls|can you|could you|would you|will you)\s+)*"
    r"(?:note|remember|keep|bear|save|store|write down|make a note of|don['\u2019]?t forget)"
    r"\b(?:\s+(?:that|this|it|in mind|please|thanks|for me|for later))*[\s.!?]*$",
    re.IGNORECASE,
)
_TAIL_WINDOW = 160
_REQUEST_FRAMES = re.compile(
    r"^(?:i|we)(?:\s+am|\s+was|\s+would|['\u2019]m|['\u2019]d)?\s+(?:"
    r"(?:(?:like|love|want|need|hoping|trying)\s+to|wanna)\s+"
    r"(?:know|ask|find out|understand|figure out|hear|learn about)\b"
    # Repairs of the conversation itself ("I meant <other>", "I changed my mind").
    r"|(?:meant|mean)\b|(?:['\u2019]ve\s+|have\s+)?changed\s+(?:my|our)\s+minds?\b"
    r"|(?:have|['\u2019]ve got|got)\s+(?:a|one|another|some|a few|two)\s+(?:\w+\s+)?"
    r"(?:question|questions|request|favou?r|query|doubt)\b"
    r"|(?:need|want|could use|would appreciate|['\u2019]d appreciate)\s+"
    r"(?:some\s+|a little\s+|a bit of\s+|a hand|a little)?help\b"
    r"|(?:wonder|wondering|curious|asking)\b)",
    re.IGNORECASE,
)


def _drop_request_tail(sentence: str) -> str:
    # Only the last few words can be a request tail; searching just them keeps
    # a long sentence linear.
    tail = _REQUEST_TAIL.search(sentence, max(0, len(sentence) - _TAIL_WINDOW))
    return sentence[: tail.start()].strip() if tail else sentence


def _strip_lead_in(sentence: str) -> str:
    text = _LEAD_IN.sub("", sentence.strip())
    label = _LABEL.match(text)
    if label and not (_SELF & set(word_tokens(label.group("label")))):
        text = text[label.end() :]
    hedge = _HEDGE.match(text)
    if hedge and _SELF & set(word_tokens(text[hedge.end() :])):
        text = text[hedge.end() :]
    return text.strip()


def _is_imperative(words: list[str]) -> bool:
    head = words[0]
    if head in _IMPERATIVE_HEADS:
        return True
    if head in _SELF or head in _DECLARATIVE_OPENERS or head[0].isdigit():
        return False
    # A gerund subject ("<Verb>ing the <thing> is ...") is not a command.
    if len(head) >= 6 and head.endswith("ing"):
        return False
    return len(words) > 1 and words[1] in _IMPERATIVE_OBJECTS


def _finite_before(words: list[str], at: int) -> bool:
    """A sign of a finite verb before ``at``: an auxiliary, a verb's "-s", or a plural subject."""
    if words[0].endswith("s") and not words[0].endswith(("ss", "us", "is")):
        return True
    return any(w in _FINITE or (w.endswith("s") and not w.endswith("ss")) for w in words[1:at])


def is_self_statement(sentence: str) -> bool:
    """Whether a (question-free) sentence states something about the user."""
    words = word_tokens(sentence)
    if words and words[0] in _BARE_CONTRACTIONS:
        words[0] = "i"
    if not words or not (_SELF & set(words)) or _ADDRESSEE & set(words):
        return False
    if _REQUEST_FRAMES.match(sentence) or _is_imperative(words):
        return False
    first_self = next(i for i, w in enumerate(words) if w in _SELF)
    user_is_subject = words[first_self] in _SELF_SUBJECT_PRONOUNS or (
        first_self == 0 and words[0] in _SELF_SUBJECT
    )
    # The user only as an object or possessor ("... gives me <effect>"): a
    # declarative needs a finite verb first; "Add <thing> to my <list>" has none.
    if not user_is_subject and not _finite_before(words, first_self):
        return False
    content = [
        w
        for i, w in enumerate(words)
        if w not in _NO_FACT and w not in _SELF and not (i and words[i - 1] in _DEMONSTRATIVES)
    ]
    return bool(content)


# What a clean third-person rewrite never holds: a first-person word, or an
# adverb inflected as if it were the verb ("User onces ...").
_UNCLEAN_REWRITE = re.compile(
    rf"\b(?:I|[Mm]e|[Mm]y|[Mm]ine|[Mm]yself)\b|\bUser\s+{_MID_ADVERB}(?:s|es)\b", re.IGNORECASE
)


def clean_rewrite(content: str) -> bool:
    """Whether a third-person rewrite is free of the mistakes the rewrite rules can make."""
    return not _UNCLEAN_REWRITE.search(content.replace("User's", "User"))


def statement_note(sentence: str) -> Candidate | None:
    """A first-person statement no keyed shape matched, as an unkeyed third-person note.

    Where the rewrite would not be clean, the speaker's own words are kept.
    """
    body = _strip_lead_in(sentence)
    if not body or is_question(body) or not is_self_statement(body):
        return None
    content = third_person(_drop_temporal(body))
    if content and not clean_rewrite(content):
        return Candidate(_strip_terminal(body) + ".", "", 0.7, "statement_as_said")
    return Candidate(content, "", 0.7, "statement") if content else None


# -- names, negations and corrections ------------------------------------------------

_NAME_VALUE = r"(?P<name>[^\W\d_][\w'.-]*(?:\s+[^\W\d_][\w'.-]*){0,3})"
_CALL_ME = re.compile(
    rf"^{_OPENER}(?:(?:please|you\s+can|you\s+may|just|feel\s+free\s+to)\s+)*"
    r"(?:(?:everyone|people|friends|they)\s+)?(?:call\s+me|i\s+go\s+by|i['\u2019]?m\s+called|"
    rf"i\s+am\s+called)\s+{_NAME_VALUE}$",
    re.IGNORECASE,
)
# "no longer", "not ... anymore", "n't ... anymore/any more": the statement negates an earlier one.
_NO_LONGER = re.compile(r"\bno\s+longer\s+", re.IGNORECASE)
_NOT_ANYMORE = re.compile(
    r"\b(?:(?P<aux>am|is|are|was|were|have|has|can|will)(?:n['\u2019]t|\s+not)|'m\s+not|"
    r"not|do\s+not|don['\u2019]t|does\s+not|doesn['\u2019]t)\s+"
    r"(?P<rest>.+?)\s+any\s*more\b",
    re.IGNORECASE,
)
_CORRECTION_LEAD = re.compile(
    r"^(?:(?:actually|oh|sorry|no|wait|correction|scratch\s+that|strike\s+that|ignore\s+that|"
    r"my\s+mistake|i\s+meant|i\s+mean)\b[\s,:;.!-]*)+",
    re.IGNORECASE,
)
_ABOUT_TOPIC = re.compile(
    r"^(?:about|regarding|on|re)\s+(?P<topic>[^:;,]+?)\s*[:;,\u2013\u2014-]\s*(?P<rest>.+)$",
    re.IGNORECASE | re.DOTALL,
)
_WRONG_ABOUT = re.compile(
    r"^i\s+was\s+wrong\s+about\s+(?P<topic>[^:;,]+?)(?:\s*[:;,\u2013\u2014-]\s*(?P<rest>.+))?$",
    re.IGNORECASE | re.DOTALL,
)
_RIGHT_NOT_WRONG = re.compile(r"^(?P<left>.+?)\s*,\s*not\s+(?P<wrong>[^,;:]+?)\s*$", re.DOTALL)
_ARTICLES = frozenset({"the", "a", "an", "my", "that", "this", "it", "its"})


def name_fact(sentence: str) -> Candidate | None:
    """ "Call me Sam", "Please call me Sam", "I go by Sam", "I'm called Sam" -> the user's name."""
    match = _CALL_ME.match(_strip_terminal(" ".join(sentence.split())))
    if not match:
        return None
    name = _clean_value(match.group("name"))
    # A name is written with a capital ("call me tomorrow" names no one).
    if not name or not name[0].isupper() or set(word_tokens(name)) & (_SELF | _ADDRESSEE):
        return None
    return Candidate(f"User's name is {name}.", "name", 0.9, "name")


# The assistant asking what to call the user: "What should I call you?",
# "What's your name?", "How would you like me to address you?".
_ASKS_NAME = re.compile(
    r"\b(?:what|how)\s+(?:should|shall|can|could|may|do\s+you\s+want|would\s+you\s+like)\s+"
    r"(?:i\s+|me\s+to\s+)?(?:call|address)\s+you\b"
    r"|\bwhat(?:['\u2019]s|\s+is)\s+your\s+(?:first\s+|preferred\s+)?name\b"
    r"|\bwhat\s+name\s+(?:do|would|should)\s+you\b"
    r"|\bwho\s+am\s+i\s+(?:talking|speaking|chatting)\s+(?:to|with)\b",
    re.IGNORECASE,
)
# A reply that is a name and nothing else worth a record: "Sam is fine.",
# "Sam works", "Sam, please.", "Just Sam.", "It's Sam.", "Sam".
_NAME_REPLY = re.compile(
    r"^(?:(?:oh|ok|okay|well|hmm|um|sure|yes|yeah)\b[\s,:;!-]*)*"
    r"(?:just\s+|it['\u2019]s\s+|it\s+is\s+)?"
    # Shortest first, so "Sam is fine" leaves "is fine" to the tail.
    r"(?P<name>[^\W\d_][\w'.-]*(?:\s+[^\W\d_][\w'.-]*){0,2}?)"
    r"(?:\s*,?\s*(?:is\s+(?:fine|good|great|ok|okay|perfect)|works|will\s+do|please|thanks|"
    r"thank\s+you)(?:\s+(?:thanks|thank\s+you|by\s+me))?)?$",
    re.IGNORECASE,
)
# Words a short reply can be that are not names ("Yes is fine" names no one).
_NOT_NAMES = frozenset(
    {
        "yes", "no", "yeah", "yep", "nope", "nah", "sure", "ok", "okay", "fine", "good",
        "great", "cool", "perfect", "right", "maybe", "whatever", "anything", "nothing",
        "thanks", "thank", "hello", "hi", "hey", "hmm", "um", "uh", "ah", "oh", "well",
        "that", "this", "it", "sorry", "pass", "none",
    }
)  # fmt: skip


def asks_for_name(text: str) -> bool:
    """Whether the last sentence of an assistant's turn asks what to call the user."""
    sentences = split_sentences(text)
    return bool(sentences) and bool(_ASKS_NAME.search(sentences[-1]))


def name_reply(text: str) -> Candidate | None:
    """A reply to "What should I call you?" that gives a name: "Sam is fine." -> the user's name.

    Only read when the turn answers that question (the caller knows); on its
    own "Sam is fine." says nothing about the user's name. A whole-turn
    "call me Sam" is :func:`name_fact`'s.
    """
    sentences = split_sentences(text)
    if len(sentences) != 1:
        return None
    match = _NAME_REPLY.match(_strip_terminal(" ".join(sentences[0].split())))
    if not match:
        return None
    name = _clean_value(match.group("name"))
    words = word_tokens(name)
    # A name is written with a capital and is none of the reply's own words.
    if (
        not name
        or not name[0].isupper()
        or set(words) & (_SELF | _ADDRESSEE | _NOT_NAMES)
        or len(words) > 3
    ):
        return None
    return Candidate(f"User's name is {name}.", "name", 0.9, "name")


def negation_fact(body: str) -> Candidate | None:
    """A first-person statement that something is no longer so, replacing the statement it negates."""
    if not body or not is_self_statement(body):
        return None
    positive = ""
    if _NO_LONGER.search(body):
        positive = _NO_LONGER.sub("", body, count=1)
    else:
        match = _NOT_ANYMORE.search(body)
        if match:
            aux = match.group("aux") or ("'m" if match.group(0).startswith("'m") else "")
            joiner = "" if aux == "'m" else " "
            positive = (
                body[: match.start()].rstrip()
                + (joiner + aux if aux else "")
                + " "
                + match.group("rest")
                + body[match.end() :]
            )
    if not positive:
        return None
    content = third_person(body)
    replaced = third_person(_drop_temporal(positive))
    if not content or not replaced:
        return None
    return Candidate(content, "", 0.8, "negation", Correction(positive=replaced))


def _content_words(text: str) -> tuple[str, ...]:
    return tuple(w for w in word_tokens(text) if w not in _ARTICLES)


def correction_fact(sentence: str) -> Candidate | None:
    """ "Actually, scratch that about Z: ... X, not Y", "I was wrong about Z ...": replaces one record."""
    body = _strip_terminal(" ".join(sentence.split()))
    lead = _CORRECTION_LEAD.match(body)
    rest = body[lead.end() :] if lead else body
    about: tuple[str, ...] = ()
    topic = _ABOUT_TOPIC.match(rest) if lead else None
    wrong_about = _WRONG_ABOUT.match(rest)
    if topic:
        about, rest = _content_words(topic.group("topic")), topic.group("rest")
    elif wrong_about:
        about, rest = _content_words(wrong_about.group("topic")), wrong_about.group("rest") or ""
    pair = _RIGHT_NOT_WRONG.match(rest) if rest else None
    if not (pair or about):
        return None
    wrong = right = ""
    said = rest.strip()
    if pair:
        wrong = pair.group("wrong").strip()
        right = " ".join(pair.group("left").split()[-len(wrong.split()) :])
    if said and is_self_statement(said):
        content = third_person(said)
    elif said:
        content = said[0].upper() + said[1:] + "."
    else:
        content = third_person(body)
    if not content:
        return None
    return Candidate(
        content, "", 0.8, "correction", Correction(wrong=wrong, right=right, about=about)
    )


def extract_sentence(sentence: str, *, statements: bool = False) -> Candidate | None:
    """At most one candidate per sentence, by the first shape that matches.

    With ``statements`` (trusted user text), a first-person statement no
    shape matched becomes an unkeyed note; untrusted content never gets
    this rule, so a webpage's "I ..." is not read as the user's.
    """
    sentence = _drop_request_tail(" ".join(sentence.split()))
    if not sentence or is_question(sentence) or is_forget_request(sentence):
        return None
    named = name_fact(sentence)
    if named:
        return named
    if statements:
        corrected = correction_fact(sentence)
        if corrected:
            return corrected
    body = _strip_terminal(sentence)
    match = _REMEMBER_THAT.match(body)
    if match:
        inner = _strip_terminal(match.group("inner").strip())
        keyed = _slot_candidate(inner, 0.9, "remember_that")
        if keyed:
            return keyed
        content = third_person(_drop_temporal(_strip_lead_in(inner) or inner))
        return Candidate(content, "", 0.8, "remember_that") if content else None
    keyed = _slot_candidate(body, 0.9, "slot")
    if keyed:
        return keyed
    match = _AVOID.match(body)
    if match:
        # Only Z: the object ends at the first clause boundary.
        what = _clean_value(_CLAUSE_END.split(match.group("what"), maxsplit=1)[0])
        if what:
            # Through the rewrite, so an "I" inside Z ("whenever I can") agrees too.
            return Candidate(third_person(f"I avoid {what}"), "", 0.8, "avoid")
    if statements:
        negated = negation_fact(_strip_lead_in(body))
        if negated:
            return negated
    return statement_note(body) if statements else None


# A coordinator (or a semicolon) followed by a new subject starts a clause of
# its own: "I'm <state> and my <relation> <Name> is a <kind>." states two
# facts. Only subject pronouns and possessives count as a new subject
# (closed-class words), so "I ski and swim" stays one clause.
_CLAUSE_SPLIT = re.compile(
    # A bare comma is not enough: "While I'm away, my <X> ..." is one sentence.
    r"(?:\s*;\s*(?:and|but|while|whereas|so|plus)?|\s*,\s*(?:and|but|while|whereas|so|plus)"
    r"|\s+(?:and|but|while|whereas|plus))\s+"
    r"(?=(?:i|i['\u2019]m|i['\u2019]ve|i['\u2019]d|i['\u2019]ll|my|we|we['\u2019]re|our|"
    r"he|she|they|his|her|their)\b)",
    re.IGNORECASE,
)
_JOINED_SUBJECT = re.compile(r"^(?:[^\s,;.]+\s+){1,4}$")


def split_clauses(sentence: str) -> list[str]:
    """A sentence's clauses, split where a coordinator brings in a new subject.

    "My son and I ..." is one subject, not two clauses: a split whose left part
    is a short phrase without a comma, before "I", is not made.
    """
    clauses: list[str] = []
    start = 0
    for match in _CLAUSE_SPLIT.finditer(sentence):
        left = sentence[start : match.start()]
        after = sentence[match.end() :]
        if not left.strip():
            continue
        joined = match.group(0).strip().lower() == "and"
        if (
            joined
            and _JOINED_SUBJECT.match(left.strip() + " ")
            and re.match(r"(?i)(?:i|we)\b", after)
        ):
            continue
        clauses.append(left)
        start = match.end()
    clauses.append(sentence[start:])
    return [clause.strip() for clause in clauses if clause.strip()]


def extract(text: str, *, statements: bool = False) -> list[Candidate]:
    """Every candidate in ``text``, in order, one per clause, without repeats of the same content.

    ``statements`` adds the first-person statement rule (trusted user text only).
    """
    seen: set[str] = set()
    found: list[Candidate] = []
    for sentence in split_sentences(text):
        clauses = split_clauses(sentence)
        # A keyed shape that spans the whole sentence ("my X is Y and Z") stays whole.
        if len(clauses) > 1 and not all(
            extract_sentence(clause, statements=statements) for clause in clauses
        ):
            clauses = [sentence]
        for clause in clauses:
            candidate = extract_sentence(clause, statements=statements)
            if candidate is None:
                continue
            digest = content_digest(candidate.content)
            if digest in seen:
                continue
            seen.add(digest)
            found.append(candidate)
    return found


def forced_note(text: str) -> Candidate | None:
    """The text itself as an unkeyed note (remember with ``force``)."""
    content = " ".join(text.split())
    return Candidate(content, "", 0.6, "note") if content else None


def explicit_fact(key: str, value: str) -> Candidate:
    """An explicit key/value write: a keyed fact that supersedes the same slot as "my X is Y"."""
    if not isinstance(key, str) or not isinstance(value, str):
        raise ExtractionError("a fact needs a text key and a text value")
    display = _display_key(key)
    fact_key = normalise_key(key)
    clean_value = " ".join(value.split())
    if not fact_key:
        raise ExtractionError("a fact key may not be empty")
    if len(display) > MAX_KEY_CHARS:
        raise ExtractionError(f"a fact key may be at most {MAX_KEY_CHARS} characters")
    if not clean_value:
        raise ExtractionError(f"the value for {fact_key!r} may not be empty")
    if len(clean_value) > MAX_VALUE_CHARS:
        raise ExtractionError(f"a fact value may be at most {MAX_VALUE_CHARS} characters")
    # A neutral "key: value" form: explicit facts are also written at tenant
    # and platform level, where "User's ..." would not be true.
    return Candidate(f"{display}: {clean_value}", fact_key, 1.0, "explicit")


# -- spoken forget requests ------------------------------------------------------

_FORGET_VERB = re.compile(
    r"^(?:(?:please|can you|could you|would you|will you|now|ok|okay|hey)\b[\s,]*)*"
    r"(?:forget|unlearn|stop remembering|delete|erase|remove|drop)\b\s*",
    re.IGNORECASE,
)
_FORGET_LEAD = re.compile(
    r"^(?:(?:that|about|what\s+I\s+(?:said|told\s+you|mentioned)(?:\s+about)?|what|"
    r"everything about|all about|the fact that)\b\s*)*",
    re.IGNORECASE,
)
_POSSESSIVE = re.compile(
    r"^(?:my|our|his|her|their|the user['\u2019]s|user['\u2019]s|mine)\b\s*", re.IGNORECASE
)
_FORGET_TAIL = re.compile(
    r"(?:[\s,]*\b(?:please|now|right now|thanks|thank you)\b)*[\s.!?,;:]*$", re.IGNORECASE
)


def forget_needle(utterance: str) -> str:
    """ "forget my backup email" -> "backup email"; refuses anything that leaves no needle."""
    if not isinstance(utterance, str) or not utterance.strip():
        raise SelectorError(f"the forget request is empty: {SAY_WHAT_TO_FORGET}")
    detected, _ = embedded_blocks(utterance)
    if detected:
        raise SelectorError(
            "the forget request embeds third-party content; embedded content can never "
            "trigger a forget: send only the user's own words"
        )
    text = " ".join(utterance.split())
    text = _FORGET_VERB.sub("", text, count=1)
    text = _FORGET_LEAD.sub("", text, count=1)
    text = _POSSESSIVE.sub("", text, count=1)
    text = _FORGET_TAIL.sub("", text, count=1)
    needle = text.strip().strip("\"'\u201c\u201d\u2018\u2019").strip()
    if not needle:
        raise SelectorError(f"the forget request names nothing to forget: {SAY_WHAT_TO_FORGET}")
    return needle


# -- matching a forget needle ----------------------------------------------------

SAY_WHAT_TO_FORGET = "say what to forget, e.g. 'forget my backup email', or give record IDs"
MIN_NEEDLE_CHARS = 3

# Words that never name a thing on their own: pronouns, determiners and words
# that mean "everything". A needle made only of these (plus the index's stop
# words) would match almost any record, so it is refused, never widened.
_NON_NAMING_TEXT = """
    i me my mine myself you your yours we us our ours they them their theirs he him his she
    her hers it its this that these those one ones someone something anything everything
    nothing all any every each some stuff thing things fact facts memory memories info
    information data details everyone anybody everybody please thanks user users
"""
_NON_NAMING_WORDS = frozenset(_NON_NAMING_TEXT.split())


@dataclass(frozen=True)
class Needle:
    """What a forget looks for: whole-word phrases, matched case-insensitively.

    ``text`` is what the caller gave (its digest goes to the audit chain);
    ``phrases`` are token runs (:func:`word_tokens`, the tokeniser recall and
    duplicate detection use). A record matches when its content's tokens
    hold any phrase as a contiguous run, so "me" never matches "meetings" and
    "beef" never matches "beefsteak".
    """

    text: str
    phrases: tuple[tuple[str, ...], ...]

    def matches(self, content: str) -> bool:
        tokens = word_tokens(content)
        return any(_holds_run(tokens, phrase) for phrase in self.phrases)


def _holds_run(tokens: list[str], phrase: tuple[str, ...]) -> bool:
    size = len(phrase)
    if not size or size > len(tokens):
        return False
    first = phrase[0]
    return any(
        tokens[index] == first and tuple(tokens[index : index + size]) == phrase
        for index in range(len(tokens) - size + 1)
    )


def _check_names_something(text: str) -> tuple[str, ...]:
    """The needle's tokens, or SelectorError when they cannot name one thing."""
    from memory.search import STOP_WORDS  # search imports this module; read at call time

    tokens = tuple(word_tokens(text))
    if sum(len(token) for token in tokens) < MIN_NEEDLE_CHARS or all(
        token in _NON_NAMING_WORDS or token in STOP_WORDS for token in tokens
    ):
        raise SelectorError(
            f"{text!r} is too vague to forget anything by: {SAY_WHAT_TO_FORGET}",
            reason="vague_selector",
        )
    return tokens


def selector_needle(selector: str) -> Needle:
    """A selector is literal text: its words, as whole words, in order."""
    text = " ".join(selector.split())
    return Needle(text, (_check_names_something(text),))


def utterance_needle(utterance: str) -> Needle:
    """A spoken request: the needle in the user's words and in the stored "User" wording.

    "forget that I avoid beef" looks for "I avoid beef", for the third-person
    rewrite "User avoids beef" and for what the extractor would have stored
    from those words (so "I don't eat beef" finds "User avoids beef.").
    """
    text = forget_needle(utterance)
    tokens = _check_names_something(text)
    phrases = [tokens]
    for rewrite in (third_person(text), _extracted_content(text)):
        rewritten = tuple(word_tokens(rewrite))
        if rewritten and rewritten not in phrases:
            phrases.append(rewritten)
    return Needle(text, tuple(phrases))


def _extracted_content(text: str) -> str:
    # As remember reads the user's own words: first-person statements included.
    candidate = extract_sentence(text, statements=True)
    if candidate is None:
        return ""
    return _strip_terminal(candidate.content)


# -- review warnings -------------------------------------------------------------------

# Text that addresses the agent rather than describing the user (prompt
# injection), and text that holds a secret. Matched on a folded copy (NFKC,
# case-folded, invisible characters dropped, runs of whitespace made one
# space) so fullwidth "ignore" or "ig\u200bnore" read the same as "ignore".
_INSTRUCTION = re.compile(
    r"\b(?:ignore|disregard|forget|override|bypass)\b(?:\s+\w+){0,3}?\s+"
    r"(?:previous|prior|above|earlier|all|any|your|the|system)\b(?:\s+\w+){0,2}?\s+"
    r"(?:instructions?|prompts?|rules|directions|guidelines|messages?)\b"
    r"|\b(?:system prompt|developer mode|jailbreak)\b"
    r"|\byou (?:are now|must now|will now|should now)\b"
    r"|\b(?:forward|send|email|upload|exfiltrate)\b(?:\s+\w+){0,3}\s+(?:to|at)\s+\S+@\S+"
    r"|\b(?:forward|send|transfer)\s+(?:all|every|any)\b"
    r"|\bdo not (?:tell|inform|mention)\b"
)
_CREDENTIAL = re.compile(
    r"\b(?:password|passwd|passphrase|pass code|passcode|pin code|api[ _-]?key|"
    r"access[ _-]?key|secret[ _-]?key|client[ _-]?secret|private[ _-]?key|"
    r"auth(?:entication)?[ _-]?token|bearer|access[ _-]?token|credentials?|2fa|otp|"
    r"one[ -]time code|recovery code|seed phrase|ssh key)\b"
    r"|-----begin [a-z ]*private key-----"
    r"|\bakia[0-9a-z]{16}\b"
    r"|\b(?:sk|pk|rk)[-_](?:live|test|proj)?[-_]?[0-9a-z]{16,}"
    r"|\bgh[pousr]_[0-9a-z]{20,}"
)
_INVISIBLE = {"Cf", "Cc", "Cs", "Co", "Cn"}
INSTRUCTION_WARNING = (
    "It reads like an instruction to the agent (prompt injection), not a fact about the user."
)
CREDENTIAL_WARNING = (
    "It mentions a password, key or other credential: memory is no place for secrets."
)


def _fold_for_warnings(text: str) -> str:
    normalised = unicodedata.normalize("NFKC", text).casefold()
    visible = "".join(
        " " if ch in "\t\n\r" else ch
        for ch in normalised
        if ch in "\t\n\r" or unicodedata.category(ch) not in _INVISIBLE
    )
    return " ".join(visible.split())


def review_warnings(text: str) -> tuple[str, ...]:
    """Why a reviewer should think twice before promoting ``text`` (empty: nothing noticed).

    A heuristic that errs towards warning: the reviewer decides, the warning
    only makes sure they read before they promote.
    """
    folded = _fold_for_warnings(text or "")
    warnings: list[str] = []
    if _INSTRUCTION.search(folded):
        warnings.append(INSTRUCTION_WARNING)
    if _CREDENTIAL.search(folded):
        warnings.append(CREDENTIAL_WARNING)
    return tuple(warnings)
