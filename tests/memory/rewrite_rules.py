"""Rules a rewrite into the third person must keep (issue 30): applied by test_rewrites.py."""

from __future__ import annotations

import re

WORD = re.compile(r"[A-Za-z]+(?:['\u2019][A-Za-z]+)?")
FIRST_PERSON = {"i", "i'm", "i've", "i'd", "i'll", "me", "my", "mine", "myself", "im", "ive"}


def _words(text: str) -> set[str]:
    return set(text.split())


# Words a rewrite may bring in that the speaker did not say.
NEW_WORDS = {
    "user",
    "user's",
    "is",
    "has",
    "was",
    "does",
    "doesn't",
    "their",
    "theirs",
    "themselves",
    "had",
    "would",
    "will",
}
ADVERBS = _words(
    "once usually always often never sometimes really also still rarely just even mostly generally "
    "seldom only already nearly finally recently constantly honestly barely hardly ever then "
    "actually currently no longer"
)
AUXILIARIES = _words(
    "is was has had does did doesn't didn't can cannot can't could couldn't will won't would "
    "wouldn't should shouldn't might must may shall isn't wasn't hasn't"
)
IRREGULAR_PAST = _words(
    "spent broke met grew lost bought ran went got taught took made said kept sent hurt built felt "
    "left told came saw knew thought found gave put set cut began drove wrote read"
)


def words(text: str) -> list[str]:
    return [w.replace("\u2019", "'") for w in WORD.findall(text)]


def problems(original: str, rewritten: str) -> list[str]:
    """What is wrong with ``rewritten`` as a third-person rewrite of ``original`` (empty: fine).

    Keeping the speaker's words unchanged is always fine.
    """
    if " ".join(rewritten.split()).rstrip(".") == " ".join(original.split()).rstrip("."):
        return []
    found: list[str] = []
    said = [w.lower() for w in words(original)]
    out = words(rewritten)
    left = [w for w in out if w.lower() in FIRST_PERSON]
    if left:
        found.append(f"first person left: {left}")
    for index, word in enumerate(out):
        if word != "User" or (index and out[index - 1].lower() == "and"):
            # "User's wife and User go ...": a joined subject takes the plural.
            continue
        at = index + 1
        while at < len(out) and out[at].lower() in ADVERBS:
            at += 1
        if at >= len(out):
            continue
        verb = out[at].lower()
        if verb in AUXILIARIES or verb in IRREGULAR_PAST or verb.endswith("ed"):
            continue
        stem_ok = verb.endswith("s") and any(
            stem in said and stem not in ADVERBS for stem in (verb[:-1], verb[:-2], verb[:-3] + "y")
        )
        if not stem_ok:
            found.append(f"no agreement after User: {verb!r}")
    for word in out:
        low = word.lower()
        if low in said or low in NEW_WORDS:
            continue
        if low.endswith("s") and any(
            stem in said and stem not in ADVERBS for stem in (low[:-1], low[:-2], low[:-3] + "y")
        ):
            continue
        found.append(f"invented word: {word!r}")
    return found
