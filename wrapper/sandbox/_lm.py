"""A tiny word-level n-gram language model, trained at start-up on ``corpus.txt``.

Tokens are GPT-style: a word or a punctuation mark, with the space before it when it had one
(``" Alice"``, ``","``), so a text is the plain concatenation of its tokens. Contexts are looked up
by their lower-cased words with stupid backoff (trigram, bigram, then the unigram distribution),
and every distribution the sampler needs is computed once and cached.
"""

from __future__ import annotations

import math
import random
import re
from collections import Counter, defaultdict
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from functools import lru_cache
from itertools import accumulate
from pathlib import Path

EOS = ""  # end of a paragraph: generation stops with finish_reason "stop"
_TOKEN = re.compile(r"(\s*)(\w+(?:[-']\w+)*|[^\w\s])")
_CORPUS = Path(__file__).with_name("corpus.txt")
_LOG_FLOOR = math.log(1e-6)


def tokenize(text: str) -> list[str]:
    """Split ``text`` into tokens (each keeps one leading space if any whitespace preceded it)."""
    return [(" " if space else "") + word for space, word in _TOKEN.findall(text)]


def _key(token: str) -> str:
    return token.strip().lower()


@dataclass(frozen=True)
class Distribution:
    """Next-token probabilities for one context, most likely first."""

    tokens: tuple[str, ...]
    logprobs: tuple[float, ...]

    def logprob(self, token: str) -> float | None:
        """The log-probability of ``token``, or None when this context never saw it."""
        try:
            return self.logprobs[self.tokens.index(token)]
        except ValueError:
            return None


@dataclass(frozen=True)
class Sampling:
    """How to pick each token: temperature 0 is greedy; top_k <= 0 and top_p >= 1 disable those cut-offs."""

    max_tokens: int
    temperature: float = 1.0
    top_k: int = 0
    top_p: float = 1.0
    stop: tuple[str, ...] = ()
    top_logprobs: int = 0


@dataclass(frozen=True)
class Step:
    """One generated token: the text it releases (held back while it may start a stop sequence)."""

    delta: str
    token: str
    logprob: float
    top_logprobs: tuple[tuple[str, float], ...]


class Generation:
    """Iterate for the steps; afterwards ``text``, ``finish_reason`` and ``tail`` (text still to flush)."""

    def __init__(self, steps: Iterator[tuple[str, float, Distribution]], sampling: Sampling) -> None:
        self._steps = steps
        self._sampling = sampling
        self.text = ""
        self.finish_reason = "length"
        self.tail = ""
        self.tokens = 0

    def __iter__(self) -> Iterator[Step]:
        stops = self._sampling.stop
        raw, released = "", 0
        for token, logprob, dist in self._steps:
            if token == EOS:
                self.finish_reason = "stop"
                break
            start = len(raw)
            raw += token
            cut = min(
                (i for i in (raw.find(s, max(0, start - len(s) + 1)) for s in stops if s) if i >= 0),
                default=-1,
            )
            if cut >= 0:
                raw, self.finish_reason = raw[:cut], "stop"
                if cut <= start:  # the stop sequence began before this token: it adds nothing
                    break
            self.tokens += 1
            safe = len(raw) if cut >= 0 else len(raw) - _held_back(raw, stops)
            n = self._sampling.top_logprobs
            top = tuple(zip(dist.tokens[:n], dist.logprobs[:n], strict=True))
            yield Step(raw[released:safe], token, logprob, top)
            released = max(released, safe)
            if cut >= 0:
                break
        self.text, self.tail = raw, raw[released:]


def _held_back(text: str, stops: Sequence[str]) -> int:
    """How many trailing characters of ``text`` could be the start of a stop sequence."""
    return max(
        (n for s in stops for n in range(min(len(s) - 1, len(text)), 0, -1) if text.endswith(s[:n])),
        default=0,
    )


class LanguageModel:
    """An n-gram model of order 2 or 3 over the shipped corpus."""

    def __init__(self, paragraphs: Sequence[str], order: int = 3) -> None:
        self.order = order
        counts: defaultdict[tuple[str, ...], Counter[str]] = defaultdict(Counter)
        for paragraph in paragraphs:
            tokens = [*tokenize(paragraph), EOS]
            keys = [EOS, EOS] + [_key(t) for t in tokens]
            for i, token in enumerate(tokens):
                counts[()][token] += 1
                counts[(keys[i + 1],)][token] += 1
                counts[(keys[i], keys[i + 1])][token] += 1
        del counts[()][EOS]  # a context nobody knows should not end the text at once
        self._counts = dict(counts)  # a plain dict: looking a context up must not add it
        unigram = self._counts[()]
        self._unigram_total = sum(unigram.values())
        self._unigram_keys: Counter[str] = Counter()
        for token, n in unigram.items():
            self._unigram_keys[_key(token)] += n
        self.distribution = lru_cache(maxsize=None)(self._distribution)  # one per context of the corpus
        self._nucleus = lru_cache(maxsize=65536)(self._nucleus_uncached)

    @classmethod
    def from_corpus(cls, order: int = 3, path: Path = _CORPUS) -> LanguageModel:
        """Train on ``path``: paragraphs separated by blank lines, lines starting with ``#`` skipped."""
        text = "\n".join(line for line in path.read_text("utf-8").splitlines() if not line.startswith("#"))
        return cls([p.strip() for p in text.split("\n\n") if p.strip()], order)

    def context(self, tokens: Sequence[str]) -> tuple[str, ...]:
        """The key for what follows ``tokens``: the longest suffix of their last ``order - 1`` lower-cased
        words that the corpus has seen followed by something (stupid backoff), down to ``()``, the unigram.
        """
        keys = tuple(_key(t) for t in tokens[-(self.order - 1) :])
        keys = (EOS,) * (self.order - 1 - len(keys)) + keys
        return next((keys[n:] for n in range(len(keys)) if keys[n:] in self._counts), ())

    def _distribution(self, context: tuple[str, ...]) -> Distribution:
        counts = self._counts[context]
        total = sum(counts.values())
        ranked = sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))
        return Distribution(tuple(t for t, _ in ranked), tuple(math.log(c / total) for _, c in ranked))

    def _nucleus_uncached(
        self, context: tuple[str, ...], temperature: float, top_k: int, top_p: float
    ) -> tuple[range, list[float]]:
        dist = self.distribution(context)
        n = len(dist.tokens) if top_k <= 0 else min(top_k, len(dist.tokens))
        weights = [math.exp((lp - dist.logprobs[0]) / temperature) for lp in dist.logprobs[:n]]
        total = sum(weights)
        if top_p < 1.0:
            mass, keep = 0.0, 0
            while keep < n and mass < top_p * total:
                mass += weights[keep]
                keep += 1
            n = max(keep, 1)
        return range(n), list(accumulate(weights[:n]))

    def generate(self, prompt: str, sampling: Sampling, rng: random.Random) -> Generation:
        """Continue ``prompt`` (a fresh paragraph when it is empty) under ``sampling``."""
        return Generation(self._steps(prompt, sampling, rng), sampling)

    def _steps(
        self, prompt: str, sampling: Sampling, rng: random.Random
    ) -> Iterator[tuple[str, float, Distribution]]:
        history = tokenize(prompt)
        bare = not prompt or prompt[-1].isspace()  # no space before the first word
        for _ in range(sampling.max_tokens):
            context = self.context(history)
            dist = self.distribution(context)
            i = 0
            if sampling.temperature > 0 and sampling.top_k != 1:
                indices, cumulative = self._nucleus(
                    context, sampling.temperature, sampling.top_k, sampling.top_p
                )
                i = rng.choices(indices, cum_weights=cumulative)[0]
            token, logprob = dist.tokens[i], dist.logprobs[i]
            if bare:
                token, bare = token.lstrip(), False
            yield token, logprob, dist
            history.append(token)

    def score(self, prompt: str, continuation: str) -> float:
        """Log-likelihood of ``continuation`` after ``prompt``, interpolated with a smoothed unigram."""
        history, total = tokenize(prompt), 0.0
        vocabulary = len(self._unigram_keys) + 1
        for token in tokenize(continuation):
            dist = self.distribution(self.context(history))
            p = sum(
                math.exp(lp)
                for t, lp in zip(dist.tokens, dist.logprobs, strict=True)
                if _key(t) == _key(token)
            )
            unigram = (self._unigram_keys[_key(token)] + 1) / (self._unigram_total + vocabulary)
            total += max(math.log(0.9 * p + 0.1 * unigram), _LOG_FLOOR)
            history.append(token)
        return total

    def choose(self, prompt: str, choices: Sequence[str]) -> str:
        """The most likely of ``choices`` after ``prompt`` (the first one on a tie)."""
        return max(choices, key=lambda choice: self.score(prompt, " " + choice))

    @staticmethod
    def count(text: str) -> int:
        """The number of tokens in ``text``."""
        return len(_TOKEN.findall(text))
