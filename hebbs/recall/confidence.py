"""Confidence and abstention: how likely each recalled memory is relevant to the cue, and whether
anything relevant was found at all.

The composite score mixes relevance with recency, importance and reinforcement: it orders results,
but 0.50 means nothing on its own (an unrelated cue still gets a top result, just a worse one).
Confidence is a separate number in 0..1, a small logistic calibration over signals that mean the
same thing in every vault:

    cosine         cue-memory cosine similarity under the embedding model
    cosine_gap     that cosine minus the mean cosine of the cue's background (its similarity hits
                   below the top 10 in the same scope): how far the memory stands out for this cue
    term_coverage  the IDF-weighted share of the cue's terms that the memory contains (BM25's
                   evidence, normalized for the cue so that it has a fixed scale)
    known_terms    the IDF-weighted share of the cue's terms found anywhere in the vault: a cue about
                   names and things the vault has never seen is about something it does not know
    missing_key    the idf of the rarest cue term the memory lacks, over the idf of the rarest cue
                   term: 1 when the memory misses the cue's most specific word ("install X with
                   Homebrew" answered by a section about installing Y with Homebrew), 0 when it has it
    nearest        the cosine of the cue's nearest memory in scope, the same for every result: when
                   nothing in the scope comes close, the vault knows nothing about the cue
                   (answer-level evidence: a result's own confidence puts its own cosine there)

A time phrase of the cue ("on 9 November, 2022", "last week") is not matched against the memories'
text: recall reads it as a time range (timewords.py) and a memory's date is not in its words, so
its terms are left out of the term features (with them, every dated question about a conversation
looked like a cue about words the vault never saw).

The coefficients were fitted by `bench/bench_abstention.py --fit` on LoCoMo conversations 26, 30,
41 and half of the notes cues, and checked on the rest (docs/honesty.md has the figures). A recall
whose best confidence is below the threshold (config recall.abstain_threshold) is marked
`abstained`: nothing relevant is known for the cue; the weak candidates are still listed.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Container, Mapping, Sequence
from typing import NamedTuple

import numpy as np

from ..config import DEFAULT_ABSTAIN_THRESHOLD
from ..store.lexical_index import tokenize
from .timewords import understand

FEATURES = ("cosine", "cosine_gap", "term_coverage", "known_terms", "missing_key", "nearest")
# Fitted by bench/bench_abstention.py --fit (docs/honesty.md); in the order of FEATURES.
COEFFICIENTS = (1.8649, 0.6585, 1.5044, 1.8246, -0.4827, 1.7859)
INTERCEPT = -3.5295
# Chosen on the fit part: the highest threshold that abstains on at most 4% of its answerable cues.
DEFAULT_THRESHOLD = DEFAULT_ABSTAIN_THRESHOLD
NOTE = "no good match: nothing relevant known for this cue"
# Below this rank the cue's similarity hits are its background, not its candidates.
BACKGROUND_FROM_RANK = 10
# Term weights are computed as if the vault held at least this many memories: in a vault of a
# handful, every word it lacks would otherwise outweigh every word it has ("what does Dana drink"
# against "Dana prefers green tea" would abstain for want of the word "drink").
REFERENCE_DOCS = 1000


# Any fixed moment will do: only which words form the time phrase matters here, not its range.
_TIME_REFERENCE_US = 1_700_000_000_000_000


def cue_terms(cue: str) -> list[str]:
    """The cue's index terms, less those of its time phrase (read as a range, not matched as words)."""
    terms = list(dict.fromkeys(tokenize(cue)))
    when = understand(cue, _TIME_REFERENCE_US)
    if when is None:
        return terms
    timed = set(tokenize(when.phrase))
    return [t for t in terms if t not in timed] or terms


def idf(doc_freq: int, docs: int) -> float:
    """BM25's idf over at least REFERENCE_DOCS documents; a term no document holds weighs the most."""
    docs = max(docs, REFERENCE_DOCS, doc_freq)
    return math.log(1.0 + (docs - doc_freq + 0.5) / (doc_freq + 0.5))


class CueEvidence:
    """What the features take from the cue and its scope, computed once per recall: each result then
    costs a dot product and a pass over the cue's few terms."""

    def __init__(self, background: Sequence[float], terms: Mapping[str, float], known: Mapping[str, bool]) -> None:
        # np.mean's own arithmetic (one pairwise sum, then a division), without its overhead.
        self.mean_background = (float(np.add.reduce(np.asarray(background, dtype=np.float64)) / len(background))
                                if len(background) else 0.0)
        self.total = sum(terms.values())
        self.known_share = sum(w for t, w in terms.items() if known.get(t)) / self.total if self.total > 0 else 0.0
        self.rarest = max(terms.values(), default=0.0)
        self.items = list(terms.items())
        self.known_rounded = round(self.known_share, 6)

    def features(self, cosine: float, memory_terms: Container[str], nearest: float) -> dict[str, float]:
        """The calibration's inputs for one memory; `nearest` is the best cosine in scope."""
        total, rarest = self.total, self.rarest
        covered, missing = 0.0, 0.0  # sums and maxima as sum() and max(default=0.0) give them (idf > 0)
        for term, weight in self.items:
            if term in memory_terms:
                covered += weight
            elif weight > missing:
                missing = weight
        return {"cosine": round(cosine, 6), "cosine_gap": round(cosine - self.mean_background, 6),
                "term_coverage": round(covered / total, 6) if total > 0 else 0.0,
                "known_terms": self.known_rounded, "missing_key": round(missing / rarest, 6) if rarest > 0 else 0.0,
                "nearest": round(max(nearest, cosine), 6)}


def calibrated(values: Mapping[str, float], coefficients: Sequence[float] = COEFFICIENTS,
               intercept: float = INTERCEPT) -> float:
    return _logistic(intercept + sum(c * values[name] for c, name in zip(coefficients, FEATURES)))


def _logistic(z: float) -> float:
    return 1.0 / (1.0 + math.exp(-max(-60.0, min(60.0, z))))


def background_of(similarities: Sequence[float]) -> list[float]:
    """The cosines that stand for "anything in this scope": past the top ranks, or all if few."""
    tail = list(similarities[BACKGROUND_FROM_RANK:])
    return tail if len(tail) >= 5 else list(similarities)


class Judged(NamedTuple):
    """One result's confidence (on its own evidence), the answer-level evidence it gives, and the
    features both were computed from."""
    confidence: float
    evidence: float
    features: dict[str, float]


def assess(cue: str, cue_vector: np.ndarray, vectors: Sequence[np.ndarray], memory_texts: Sequence[str],
           similarities: Sequence[float], doc_freq: Callable[[list[str]], dict[str, int]],
           docs: int, memory_terms: Sequence[Container[str]] | None = None) -> list[Judged]:
    """The judgement of each result, in order.

    `evidence` reads the calibration with `nearest`, the best cosine in the recall's scope: whether
    the vault knows anything close to the cue. The answer's confidence is the best evidence. A result's
    own `confidence` puts its own cosine in that place: another memory being close says nothing about
    this one ("Acme uses Salesforce" is no more relevant to "who is on call for billing" because
    the billing note is). For the cue's nearest memory the two are the same.

    `vectors` and `memory_texts` are the results' stored vectors and lexical texts (`memory_terms`,
    when given, their index terms, so that texts need not be tokenized again); `similarities` the
    cue's similarity hits over the whole recall scope, best first; `doc_freq` gives the vault's
    document frequency of terms, `docs` the number of documents."""
    names = cue_terms(cue)
    freqs = doc_freq(names) if names else {}
    terms = {t: idf(freqs.get(t, 0), docs) for t in names}
    evidence = CueEvidence(background_of(similarities), terms, {t: freqs.get(t, 0) > 0 for t in names})
    if memory_terms is None:
        memory_terms = [set(tokenize(text)) for text in memory_texts]
    cosines = [float(np.dot(cue_vector, vector)) for vector in vectors]
    nearest = max([*similarities[:1], *cosines], default=0.0)
    out = []
    c_cosine, c_gap, c_coverage, c_known, c_missing, c_nearest = COEFFICIENTS
    for cosine, held in zip(cosines, memory_terms):
        values = evidence.features(cosine, held, nearest)
        # calibrated(), unrolled: the same sum in the same order, shared by both readings up to the
        # last term (`nearest`, which a result's own confidence reads as its own cosine).
        partial = (c_cosine * values["cosine"] + c_gap * values["cosine_gap"] + c_coverage * values["term_coverage"]
                   + c_known * values["known_terms"] + c_missing * values["missing_key"])
        own = _logistic(INTERCEPT + (partial + c_nearest * values["cosine"]))
        out.append(Judged(round(own, 4), round(_logistic(INTERCEPT + (partial + c_nearest * values["nearest"])), 4),
                          values))
    return out


def abstains(confidences: Sequence[float], threshold: float) -> bool:
    return not confidences or max(confidences) < threshold
