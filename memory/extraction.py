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
from dataclasses import dataclass

from memory.errors import ExtractionError, SelectorError
from memory.models import SourceType

MAX_TEXT_CHARS = 100_000
MAX_KEY_CHARS = 200
MAX_VALUE_CHARS = 10_000
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
_KEY = r"(?P<key>[^\W_][\w'./+&-]*(?:\s+[^\W_][\w'./+&-]*){0,5}?)"
_TRAILER = r"(?:\s*,?\s*\b(?:going forward|from now on|for now|please|instead)\b)*"

_SLOT = re.compile(
    rf"^{_OPENER}my\s+{_KEY}\s+(?P<verb>is|are)\s+(?P<value>.+?){_TRAILER}$",
    re.IGNORECASE | re.DOTALL,
)
_USE_AS = re.compile(
    rf"^{_OPENER}(?:(?:please|going forward|from now on)\b[\s,]*)*use\s+(?P<value>.+?)\s+as\s+my\s+{_KEY}{_TRAILER}$",
    re.IGNORECASE | re.DOTALL,
)
_REMEMBER_THAT = re.compile(
    rf"^{_OPENER}(?:please\s+)?remember\s+that\s+(?P<inner>.+)$", re.IGNORECASE | re.DOTALL
)
_AVOID = re.compile(
    rf"^{_OPENER}I\s+(?:avoid|never\s+eat|don['\u2019]t\s+eat|do\s+not\s+eat|dislike)\s+(?P<what>.+?){_TRAILER}$",
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
class Candidate:
    """A fact the extractor found: content, slot (``""`` when unkeyed), confidence, rule."""

    content: str
    fact_key: str
    confidence: float
    rule: str


_SENTENCE_END = re.compile(r"(?P<end>[.!?])\s+")
_ABBREVIATION = re.compile(r"(?:^|\s)[A-Z][a-z]?\.$")


def split_sentences(text: str) -> list[str]:
    """Lines, then sentence ends; a dot inside a token (an email, a version) is not an end."""
    sentences: list[str] = []
    for line in text.splitlines():
        start = 0
        for end in _SENTENCE_END.finditer(line):
            # An initial or a short title ("J.", "Dr.") does not end a sentence.
            if end.group("end") == "." and _ABBREVIATION.search(line, 0, end.start() + 1):
                continue
            sentences.append(line[start : end.start() + 1])
            start = end.end()
        sentences.append(line[start:])
    cleaned = (part.strip().lstrip("-*•>").strip() for part in sentences)
    return [part for part in cleaned if part]


def _strip_terminal(sentence: str) -> str:
    return re.sub(r"[\s.!;,]+$", "", sentence)


def is_question(sentence: str) -> bool:
    if sentence.rstrip().endswith("?"):
        return True
    words = word_tokens(sentence)
    return bool(words) and words[0] in QUESTION_WORDS


def is_forget_request(sentence: str) -> bool:
    return bool(_FORGET_REQUEST.match(sentence.strip()))


def _clean_value(value: str) -> str:
    return _strip_terminal(" ".join(value.split()))


def _display_key(key: str) -> str:
    return " ".join(key.split())


def _valid_key(key: str) -> bool:
    words = normalise_key(key).split()
    return bool(words) and not (_KEY_STOP & set(words)) and len(key) <= MAX_KEY_CHARS


def _slot_candidate(sentence: str, confidence: float, rule: str) -> Candidate | None:
    match = _USE_AS.match(sentence)
    if match and _valid_key(match.group("key")):
        value = _clean_value(match.group("value"))
        key = _display_key(match.group("key"))
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


_IRREGULAR = {
    "am": "is",
    "have": "has",
    "do": "does",
    "go": "goes",
    "was": "was",
    "can": "can",
    "could": "could",
    "will": "will",
    "would": "would",
    "shall": "shall",
    "should": "should",
    "may": "may",
    "might": "might",
    "must": "must",
    "don't": "doesn't",
    "don\u2019t": "doesn\u2019t",
}


def _third_person_verb(verb: str) -> str:
    lower = verb.lower()
    if lower in _IRREGULAR:
        return _IRREGULAR[lower]
    if not lower.isalpha():
        return verb
    if re.search(r"(s|sh|ch|x|z|o)$", lower):
        return verb + "es"
    if re.search(r"[^aeiou]y$", lower):
        return verb[:-1] + "ies"
    return verb + "s"


def third_person(text: str) -> str:
    """Rewrite a first-person statement about the user in the third person."""
    out = re.sub(r"\bI['\u2019]m\b", "User is", text)
    out = re.sub(r"\bI['\u2019]ve\b", "User has", out)
    out = re.sub(r"\bI['\u2019]ll\b", "User will", out)
    out = re.sub(r"\bI['\u2019]d\b", "User would", out)
    out = re.sub(
        r"\bI\s+([A-Za-z'\u2019]+)", lambda m: "User " + _third_person_verb(m.group(1)), out
    )
    out = re.sub(r"\b[Mm]y\b", "User's", out)
    out = re.sub(r"\b[Mm]ine\b", "User's", out)
    out = re.sub(r"\b[Mm]yself\b", "User", out)
    out = re.sub(r"\bme\b", "User", out)
    out = _strip_terminal(" ".join(out.split()))
    if not out:
        return out
    return out[0].upper() + out[1:] + "."


def extract_sentence(sentence: str) -> Candidate | None:
    """At most one candidate per sentence, by the first shape that matches."""
    sentence = sentence.strip()
    if not sentence or is_question(sentence) or is_forget_request(sentence):
        return None
    body = _strip_terminal(sentence)
    match = _REMEMBER_THAT.match(body)
    if match:
        inner = _strip_terminal(match.group("inner").strip())
        keyed = _slot_candidate(inner, 0.9, "remember_that")
        if keyed:
            return keyed
        content = third_person(inner)
        return Candidate(content, "", 0.8, "remember_that") if content else None
    keyed = _slot_candidate(body, 0.9, "slot")
    if keyed:
        return keyed
    match = _AVOID.match(body)
    if match:
        # Only Z: the object ends at the first clause boundary.
        what = _clean_value(_CLAUSE_END.split(match.group("what"), maxsplit=1)[0])
        if what:
            return Candidate(f"User avoids {what}.", "", 0.8, "avoid")
    return None


def extract(text: str) -> list[Candidate]:
    """Every candidate in ``text``, in order, without repeats of the same content."""
    seen: set[str] = set()
    found: list[Candidate] = []
    for sentence in split_sentences(text):
        candidate = extract_sentence(sentence)
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
    candidate = extract_sentence(text)
    if candidate is None:
        return ""
    return _strip_terminal(candidate.content)
