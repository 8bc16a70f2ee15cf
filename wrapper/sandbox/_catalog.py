"""What the sandbox knows besides each API's models (in its handler): its RAG collection, its blocklist,
its failure trigger and the credential it refuses."""

from __future__ import annotations

import re
from dataclasses import dataclass

FAIL_TRIGGER = "__fail__"
"""A prompt containing this fails generation: Gradient ``failed``; Scale 500, or a stream ``error`` event."""

REJECTED_CREDENTIAL = "invalid"
"""Any credential is accepted except this one (and an empty one), which gets a 401."""

BLOCKLIST = ("contraband", "explosives", "malware")
"""Words that make a Gradient query ``flaggedContent`` (whole words, any case)."""

_BLOCKED = re.compile(r"\b(?:" + "|".join(BLOCKLIST) + r")\b", re.IGNORECASE)
_WORD = re.compile(r"[a-z]+")
_STOPWORDS = frozenset(
    re.findall(
        r"\w+",
        "a an and are as at be but by did do does for from had has have he her his how i in is it its me "
        "my no not of on or she so that the their them then there they this to was what when where which "
        "who why will with you your",
    )
)


@dataclass(frozen=True)
class Model:
    """A model id, its n-gram order, its context length in tokens and whether it takes guidance."""

    id: str
    order: int
    context: int
    guidance: bool = False
    description: str = ""


RAG_COLLECTION = "wonderland"
RAG_DOCUMENTS = (
    "The White Rabbit wore a waistcoat with a pocket, and took a watch out of it.",
    "Alice fell down a very deep rabbit-hole and landed on a heap of sticks and dry leaves.",
    "On a little glass table lay a tiny golden key that opened a door fifteen inches high.",
    "A bottle labelled DRINK ME made Alice shut up like a telescope, only ten inches high.",
    "A cake marked EAT ME made Alice open out like the largest telescope that ever was.",
    "Alice swam in a pool of her own tears with a Mouse, a Duck, a Dodo, a Lory and an Eaglet.",
)
"""The one RAG collection's documents; a query matches those that share a word (stop words aside)."""


def flagged(text: str) -> list[str]:
    """The blocklisted words in ``text``, in order."""
    return _BLOCKED.findall(text)


def retrieve(query: str) -> list[str]:
    """The RAG documents sharing a non-stop-word with ``query``."""
    words = set(_WORD.findall(query.lower())) - _STOPWORDS
    return [doc for doc in RAG_DOCUMENTS if words & set(_WORD.findall(doc.lower()))]
