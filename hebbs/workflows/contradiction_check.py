"""Contradiction candidates: a cheap heuristic classifier over pairs of similar memories, whose pairs
above a confidence threshold are queued for review (nothing is superseded or deleted here). The
cues it scores, their weights, and what looks like a contradiction and is not: docs/contradictions.md.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Iterable
from difflib import SequenceMatcher
from functools import lru_cache
from typing import Any

import msgspec
from ulid import ULID

from ..errors import NotFound
from ..models import calibration
from ..schema import Memory, PendingContradiction

__all__ = ["Verdict", "classify", "find_candidates", "subject_of", "stem", "value_change", "ANTONYMS", "MAX_CONFIDENCE",
           "THRESHOLD"]

MAX_CONFIDENCE = 0.75
THRESHOLD = 0.35
NEIGHBORS = 10

W_ANTONYM = 0.45
W_NEGATION = 0.4
W_NUMBER = 0.4
W_REVISION = 0.15
W_VALUE = 0.4
W_DEFAULT = 0.45
MIN_OVERLAP = 0.65
DIFFERENT_OBJECTS = 0.5

_PAIRS = """
reliable unreliable, stable unstable, success failure, succeeded failed, succeeds fails, successful unsuccessful,
pass fail, passed failed, passes fails, passing failing, works broken, working broken, fast slow, faster slower,
fastest slowest, quick slow, enabled disabled, enable disable, enables disables, true false, 
increase decrease, increased decreased, increases decreases, increasing decreasing, rise fall, rose fell,
higher lower, high low, more less, most least, better worse, best worst, good bad, cheap expensive,
cheaper costlier, easy hard, easy difficult, simple complex, strong weak, safe unsafe, secure insecure,
valid invalid, correct incorrect, right wrong, available unavailable, supported unsupported, possible impossible,
allowed forbidden, allow deny, allowed denied, accept reject, accepted rejected, approve reject, approved rejected,
always never, open closed, public private, online offline, active inactive, start stop, started stopped,
include exclude, included excluded, required optional, mandatory optional, like dislike, likes dislikes,
love hate, loves hates, agree disagree, agrees disagrees, agreed disagreed, win lose, won lost, profitable unprofitable,
legal illegal, present absent, visible hidden, add remove, added removed, adds removes, gain loss, growth decline,
growing shrinking, grew shrank, early late, earlier later, maximum minimum, max min,
internal external, sync async, synchronous asynchronous,
happy unhappy, satisfied dissatisfied, likely unlikely, certain uncertain, confirmed unconfirmed, complete incomplete,
completed abandoned, finished unfinished, healthy unhealthy, clean dirty, consistent inconsistent, compatible incompatible,
efficient inefficient, accurate inaccurate, sufficient insufficient, adequate inadequate, responsive unresponsive,
up-to-date outdated, current outdated, new old, newer older, alive dead, keep drop, kept dropped, buy sell, bought sold,
hired fired, lead follow, included omitted, locked unlocked, encrypted unencrypted,
signed unsigned, paid unpaid, resolved unresolved, fixed broken, approved denied, permanent temporary,
"""
ANTONYMS: dict[str, set[str]] = {}
for _pair in _PAIRS.replace("\n", " ").split(","):
    _words = _pair.split()
    if len(_words) == 2:
        ANTONYMS.setdefault(_words[0], set()).add(_words[1])
        ANTONYMS.setdefault(_words[1], set()).add(_words[0])

# Base forms of antonym verbs that name an action a reader performs: in instruction position they
# make two procedures (add / remove a collaborator), not two conflicting claims.
ACTION_VERBS = {"add", "remove", "enable", "disable", "start", "stop", "include", "exclude", "allow", "deny",
                "accept", "reject", "approve", "keep", "drop", "buy", "sell", "increase", "decrease", "open"}
# Words after which a verb is an instruction or a possibility rather than a statement of fact.
_INSTRUCTION_LEADS = {"to", "can", "cannot", "could", "may", "might", "must", "should", "will", "please", "click",
                      "tap", "select", "choose", "press", "then", "you", "how", "let", "lets", "first", "next",
                      "also", "simply", "just", "and", "or"}
_NEGATIONS = {"not", "no", "never", "none", "nobody", "nothing", "neither", "nor", "cannot", "without", "nowhere"}
_REVISION_MARKERS = ("no longer", "not anymore", "anymore", "any more", "now", "instead", "switched", "switch to",
                     "replaced", "replaces", "moved to", "migrated", "deprecated", "used to", "previously",
                     "formerly", "changed to", "was changed", "has changed", "turns out", "actually", "in fact",
                     "correction", "update:", "updated")
_MARKER_RE = re.compile(r"\b(?:" + "|".join(re.escape(m) for m in _REVISION_MARKERS) + r")(?!\w)")
_NEGATION_SKIP = {"be", "been", "being", "is", "are", "was", "were", "do", "does", "did", "have", "has", "had", "a",
                  "an", "the", "to", "any", "longer", "more", "yet", "only", "always", "ever", "really", "even",
                  "necessarily", "just", "so", "very", "all", "get", "got", "going", "it", "that", "this"}
_STOP = set("""
a an the and or but if then so of to in on at by for with from as is are was were be been being am do does did
has have had it its this that these those there here i we you he she they me us him her them my our your their
his what which who whom whose when where why how will would shall should can could may might must also just than
too very about into over under again further once all any both each few other some such only own same s t
""".split()) - _NEGATIONS
_TOKEN = re.compile(r"[a-z0-9]+(?:[.,'’-][a-z0-9]+)*")
_NUMBER = re.compile(r"^\d+(?:[.,]\d+)?$")
_MARKUP = ("{{", "}}", '{"', '":', "</", "/>", "=", "→", "<-", "│", "├", "└", "```")
_CONDITIONAL = {"if", "when", "whenever", "unless", "whether"}
_LABEL = re.compile(r"^[A-Z][\w'’. -]{0,30}:\s+")
MIN_CLAIM_TOKENS = 3
_SENTENCE = re.compile(r"(?<=[.!?])\s+|\n+")
# Markdown wraps a sentence over lines: a line that does not end a sentence, followed by one that
# goes on in lower case, is the same sentence (split there, "must adhere to X and should not
# contain" would face "must adhere to X." as its negation).
_SOFT_WRAP = re.compile(r"(?<=[^\s.!?:;])[ \t]*\n(?=[a-z])(?![\w-]*:\s)")
# Annotation and footnote markers ("(1)", "[^2]") number a note, not a quantity.
_MARKER = re.compile(r"\(\d{1,2}\)|\[\^\w+\]")
# A capitalized name or "version" followed by a number names which thing ("Jekyll 3", "Python 2.7"):
# two sentences about different versions describe two things, they do not disagree on a number.
_VERSION = re.compile(r"\b(?:[A-Z][A-Za-z]+|[Vv]ersion)\s+v?\d+(?:\.\d+)*\b")
# "post_excerpt_max_categories: 2": a setting and its value, data rather than a statement.
_SETTING = re.compile(r"^[\w.-]*[_.-][\w.-]*\s*:\s")
# Fenced code is an example, not a claim; its lines are dropped before sentences are split.
_FENCE = re.compile(r"^[ \t]*(`{3,}|~{3,})[^\n]*\n.*?^[ \t]*\1[ \t]*$", re.S | re.M)
# A short span in backticks or quotes is a literal: a value, a property, a command ("the `"stop"`
# property", "returns a `Boolean`"). Its words name something, they are not predicates, so an
# antonym inside one is no cue; but the same sentence with another literal is a differing value.
_LITERAL = re.compile(r"`([^`\n]{1,60})`|\"([^\"\n]{1,40})\"|“([^”\n]{1,40})”")
MAX_LITERAL_TOKENS = 3
_EXAMPLE = re.compile(r"\b(?:like|such as|e\.g\.?|eg|including)(?:\s+(?:the|a|an))?(?:\s*§\s*(?:,|or|and))*\s*$")
RESPELLED = 0.93
_LINK_TEXT = re.compile(r"\[[^\]\n]*\]\([^)\n]*\)")
# "`check` checks whether ...": prose that starts with a literal, unlike a line of code.
_LITERAL_LEAD = re.compile(r"^`[A-Za-z_][\w.()-]{0,39}`\s+[a-z]+\s+[a-z]+\s+[a-z]+")
# "Use this setting to specify which tags should be excluded": what follows a verb of choosing and
# "which" / "whether" is the choice a setting offers, not a statement that it is so.
_CHOICE = re.compile(r"\b(?:specif\w*|choos\w*|chose\w*|select\w*|decid\w*|control\w*|determin\w*|configur\w*)"
                     r"\s+(?:which|whether|what|if)\b(.*)", re.I)
# A setting's default stated as a line ("* Default: false") or in a table's "Default" column.
_DEFAULT_LINE = re.compile(r"^[ \t]*(?:[-*+][ \t]+)?(?:\*\*)?Default(?: value)?(?:\*\*)?:(?:\*\*)?[ \t]*(\S[^\n]*)$",
                           re.M | re.I)
_TABLE_SEPARATOR = re.compile(r"^\s*\|?\s*:?-{3,}")
# Words that carry a cue are not part of "the same statement" (nor is "longer" of "no longer").
_CUE_WORDS = set(ANTONYMS) | _NEGATIONS | {w for m in _REVISION_MARKERS for w in m.rstrip(":").split()}


class Verdict(msgspec.Struct):
    confidence: float
    reasons: list[str] = []


class _Sentence(msgspec.Struct):
    text: str
    tokens: frozenset[str]
    words: frozenset[str]  # content words, without cue words and numbers: what "same statement" is judged on
    negated: bool
    numbers: frozenset[str]
    markers: frozenset[str]
    actions: frozenset[str]  # action verbs used as instructions ("Add a ...", "to remove ...")
    question: bool
    versions: frozenset[str] = frozenset()  # a name and its number: "jekyll 3", "python 2.7"
    literal_words: frozenset[str] = frozenset()  # words inside short backtick or quoted spans
    template: str = ""  # the sentence with each literal replaced by a placeholder
    literals: tuple[str, ...] = ()  # those literals, in order
    choice_words: frozenset[str] = frozenset()  # words of a choice offered ("specify which ... are excluded")
    negates: frozenset[str] = frozenset()  # the words the sentence's negations bear on (stemmed)
    key: str = ""  # the sentence's tokens: two sentences with one key say the same thing


@lru_cache(maxsize=1024)
def _analyze(text: str) -> tuple[_Sentence, ...]:
    out = []
    for raw in _SENTENCE.split(_SOFT_WRAP.sub(" ", text)):
        if raw.lstrip().startswith("#"):
            continue  # a heading names a section ("Store path is NOT specified"), it does not assert
        raw = raw.strip().lstrip(">-*+ ").strip()
        if not raw:
            continue
        if not _claim_like(raw):
            continue
        low = raw.lower().replace("’", "'")
        toks = _TOKEN.findall(_MARKER.sub(" ", _LABEL.sub("", raw, count=1)).lower().replace("’", "'"))
        tokens = frozenset(t for t in toks)
        negated = bool(tokens & _NEGATIONS) or any(t.endswith("n't") for t in toks)
        negates = _negated_words(toks)
        numbers = frozenset(t.replace(",", ".") for t in toks if _NUMBER.match(t))
        words = frozenset(stem(t) for t in toks if t not in _STOP and t not in _CUE_WORDS and not _NUMBER.match(t)
                          and not t.endswith("n't") and len(t) > 1)
        if len(words) < 2:
            continue
        markers = frozenset(_MARKER_RE.findall(low))
        versions = frozenset(m.group(0).lower() for m in _VERSION.finditer(raw))
        numbers -= {v.split()[-1].lstrip("v") for v in versions}  # a version's number names, it does not count
        spans = [next(g for g in m.groups() if g is not None) for m in _LITERAL.finditer(raw)]
        spans = [span for span in spans if len(_TOKEN.findall(span.lower())) <= MAX_LITERAL_TOKENS]
        literal_words = frozenset(t for span in spans for t in _TOKEN.findall(span.lower().replace("’", "'")))
        template = " ".join(_LITERAL.sub("§", low).split()).rstrip(".!:;")
        out.append(_Sentence(raw, tokens, words, negated, numbers, markers, _instructed(toks), raw.endswith("?"),
                             versions, literal_words, template, tuple(" ".join(sp.lower().split()) for sp in spans),
                             _choice_words(raw), negates, " ".join(toks)))
    return tuple(out)


def _choice_words(raw: str) -> frozenset[str]:
    m = _CHOICE.search(raw)
    return frozenset(_TOKEN.findall(m.group(1).lower())) if m else frozenset()


def _negated_words(toks: list[str]) -> frozenset[str]:
    """The word each negation bears on: the next one past auxiliaries ("does not *renew*", "will
    not be *fetched*", "no longer *uses*"). "Node does not use X, but instead Y is resolved" negates
    "use", so it does not deny "Y is resolved"."""
    out = set()
    for i, tok in enumerate(toks):
        if tok in _NEGATIONS or tok.endswith("n't"):
            nxt = next((t for t in toks[i + 1:] if t not in _NEGATION_SKIP), None)
            if nxt is not None:
                out.add(stem(nxt))
    return frozenset(out)


def _claim_like(raw: str) -> bool:
    """Prose that states something, as opposed to code, data, output or a fragment."""
    if any(mark in raw for mark in _MARKUP) or raw.count("|") >= 2:
        return False
    if not (raw[0].isalpha() or raw[0] in "\"'(“‘" or _LITERAL_LEAD.match(raw)) or _SETTING.match(raw):
        return False
    if raw.endswith((",", "{", "[", "(")):
        return False  # a line of code or data that goes on ("target: 'ws://localhost:5174',")
    toks = _TOKEN.findall(raw.lower())
    return len(toks) >= MIN_CLAIM_TOKENS and sum(bool(_NUMBER.match(t)) for t in toks) <= 0.3 * len(toks)


def _instructed(toks: list[str]) -> frozenset[str]:
    """The action verbs of a sentence that stand where an instruction puts its verb."""
    out = set()
    leading = True
    for i, tok in enumerate(toks):
        if tok in ACTION_VERBS and (leading or toks[i - 1] in _INSTRUCTION_LEADS):
            out.add(tok)
        leading = leading and bool(_NUMBER.match(tok))  # "1. Add ...": the step number is not the start
    return frozenset(out)


def stem(word: str) -> str:
    """Just enough stemming that "uses" and "use", "renewed" and "renews" count as the same word; a
    final "e" goes too, so that "likes" (stripped of "es") meets "like" and "serves" meets "serve"
    ("The user likes spicy food" / "The user does not like spicy food" was no negation)."""
    for suffix in ("ing", "ed", "es", "s"):
        if word.endswith(suffix) and len(word) - len(suffix) >= 3:
            word = word[:-len(suffix)]
            break
    return word[:-1] if word.endswith("e") and len(word) >= 4 else word


def classify(a: str, b: str, subjects: tuple[str | None, str | None] = (None, None)) -> Verdict:
    """How likely two texts contradict each other (0 .. MAX_CONFIDENCE), and why. `subjects` name
    what each text is about when known (a section's heading, a note's name)."""
    return _verdict(a, b, _analyze(a), _analyze(b), subjects)


def _verdict(a: str, b: str, xs: tuple[_Sentence, ...], ys: tuple[_Sentence, ...],
             subjects: tuple[str | None, str | None]) -> Verdict:
    sentences = _judge(xs, ys, _different_subjects(a, b, subjects), _subject_words(subjects))
    defaults = _default_conflict(a, b, subjects)
    return defaults if defaults.confidence > sentences.confidence else sentences


def _subject_words(subjects: tuple[str | None, str | None]) -> tuple[frozenset[str], frozenset[str]]:
    def words(subject: str | None) -> frozenset[str]:
        return frozenset(_TOKEN.findall((subject or "").lower().replace("-", " ")))
    return words(subjects[0]), words(subjects[1])


@lru_cache(maxsize=1024)
def _defaults(text: str) -> frozenset[tuple[str | None, str]]:
    """The defaults a section states, each with the heading it stands under in the text (None
    before any): "Default: X" lines and the "Default" column of a table. A page of options under
    one "Options" heading gives each option its own sub-heading, and that names the setting."""
    found: set[tuple[str | None, str]] = set()
    lines = text.splitlines()
    heading: str | None = None
    fenced = False
    for i, line in enumerate(lines):
        if line.lstrip().startswith(("```", "~~~")):
            fenced = not fenced
        if fenced:
            continue  # a default in a code example's comment belongs to the example
        if line.startswith("#"):
            heading = _value(line.lstrip("#"))
            continue
        if m := _DEFAULT_LINE.match(line):
            found.add((heading, _value(m.group(1))))
        cells = [c.strip().lower() for c in line.strip().strip("|").split("|")]
        if "default" in cells and "|" in line and i + 2 < len(lines) and _TABLE_SEPARATOR.match(lines[i + 1]):
            row = [c.strip() for c in lines[i + 2].strip().strip("|").split("|")]
            if len(row) == len(cells):
                found.add((heading, _value(row[cells.index("default")])))
    return frozenset((h, v) for h, v in found if v)


def _value(text: str) -> str:
    """A value as written, without markup, quotes or a note in parentheses ("`4096` (4 KiB)")."""
    text = re.sub(r"\s\([^)]*\)", "", text)
    return " ".join(re.sub(r"</?code>|[`*\"“”']", "", text).lower().split()).rstrip(".")


def _default_conflict(a: str, b: str, subjects: tuple[str | None, str | None]) -> Verdict:
    """Two sections about the same named setting that state different defaults: a fact changed. The
    subject must be known and shared; two settings with different defaults are two settings."""
    def by_setting(text: str, subject: str | None) -> dict[str, set[str]]:
        out: dict[str, set[str]] = {}
        for heading, value in _defaults(text):
            name = heading or (_value(subject) if subject else None)
            if name:
                out.setdefault(name, set()).add(value)
        return out

    da, db = by_setting(a, subjects[0]), by_setting(b, subjects[1])
    for name in sorted(da.keys() & db.keys()):
        if len(da[name]) == 1 and len(db[name]) == 1 and da[name] != db[name]:
            (va,), (vb,) = da[name], db[name]
            return Verdict(W_DEFAULT, [f"defaults differ for {name}: {va} vs {vb}", f"a: {_quote('Default: ' + va)}",
                                       f"b: {_quote('Default: ' + vb)}"])
    return Verdict(0.0, [])


def subject_of(memory: Memory) -> str | None:
    """What a vault section is about: its heading, or for a section without one its note's name."""
    if memory.source is None:
        return None
    if memory.source.heading_path:
        return memory.source.heading_path[-1]
    return memory.source.file_path.rsplit("/", 1)[-1].rsplit(".", 1)[0]


def _different_subjects(a: str, b: str, subjects: tuple[str | None, str | None]) -> str | None:
    """"x / y" when the texts are about differently named subjects, neither named in the other's
    prose. A name in backticks or a link is a cross-reference: two settings' pages often point at
    each other ("takes priority over `ssr.noExternal`") and stay about two settings."""
    x, y = subjects
    if not x or not y:
        return None
    x, y = " ".join(x.lower().split()), " ".join(y.lower().split())
    if x == y or _names(b, x) or _names(a, y):
        return None
    return f"{subjects[0]} / {subjects[1]}"


def _names(text: str, subject: str) -> bool:
    text = _LINK_TEXT.sub(" ", _LITERAL.sub(" ", text))
    return re.search(r"(?<!\w)" + re.escape(subject) + r"(?!\w)", " ".join(text.lower().split())) is not None


def _judge(xs: tuple[_Sentence, ...], ys: tuple[_Sentence, ...], different_subjects: str | None = None,
           subject_words: tuple[frozenset[str], frozenset[str]] = (frozenset(), frozenset())) -> Verdict:
    best = Verdict(0.0, [])
    # A sentence both memories hold is not where they differ: when each says "only dev packages
    # are fetched" and "dev packages are not fetched", they describe two options alike.
    keys_x, keys_y = {x.key for x in xs}, {y.key for y in ys}
    for x in xs:
        for y in ys:
            if x.question or y.question or x.key in keys_y or y.key in keys_x:
                continue
            # A named value that differs (_named_value) is where they disagree, not what they share; so is
            # a value a change statement gives (_changed_value): there only the subject is compared.
            changed = _changed_value(x, y)
            named = None if changed is not None else _named_value(x, y)
            if named is not None:
                words_x, words_y = x.words - _value_words(named[0]), y.words - _value_words(named[1])
            else:
                words_x, words_y = x.words, y.words
            shared = len(words_x & words_y)
            # Jaccard, not containment: two sentences about different subjects that share a
            # sentence pattern ("X cost us 40 hours" / "Y cost us 300 hours") must not count.
            overlap = 1.0 if changed is not None else shared / max(1, len(words_x | words_y))
            if changed is None and (shared < 2 or overlap < MIN_OVERLAP):
                continue
            if changed is not None:
                score, reasons = W_VALUE + W_REVISION, [f"values differ: {changed.a} vs {changed.b}",
                                                        f"a change: {changed.how}"]
            else:
                score, reasons = _cues(x, y, subject_words, named_value=named)
            if not reasons:
                continue
            only_x, only_y = (frozenset(), frozenset()) if changed is not None else (x.words - y.words, y.words - x.words)
            if any(r.startswith("values differ") for r in reasons):
                # The differing literal or name is the disagreement, not a sign of two objects.
                # (words are stemmed, a literal's words as written: both forms go)
                only_x = only_x - x.literal_words - {stem(t) for t in x.literal_words}
                only_y = only_y - y.literal_words - {stem(t) for t in y.literal_words}
                if named is not None:
                    only_x, only_y = only_x - _value_words(named[0]), only_y - _value_words(named[1])
            if only_x and only_y:
                score *= DIFFERENT_OBJECTS
                reasons.append(f"different objects? only a: {', '.join(sorted(only_x)[:3])}; "
                               f"only b: {', '.join(sorted(only_y)[:3])}")
            elif x.versions and y.versions and not x.versions & y.versions and changed is None:
                score *= DIFFERENT_OBJECTS
                reasons.append(f"different versions? {', '.join(sorted(x.versions))} / {', '.join(sorted(y.versions))}")
            elif different_subjects is not None:
                score *= DIFFERENT_OBJECTS
                reasons.append(f"different subjects? {different_subjects}")
            elif x.tokens & _CONDITIONAL and y.tokens & _CONDITIONAL and x.template != y.template:
                # (the same template around one differing literal means the same condition)
                score *= DIFFERENT_OBJECTS
                reasons.append("different cases? both are conditions")
            confidence = round(min(MAX_CONFIDENCE, score * (0.5 + 0.5 * overlap)), 3)
            if confidence > best.confidence:
                best = Verdict(confidence, reasons + [f"a: {_quote(x.text)}", f"b: {_quote(y.text)}"])
    return best


def _cues(x: _Sentence, y: _Sentence,
          subject_words: tuple[frozenset[str], frozenset[str]] = (frozenset(), frozenset()),
          named_value: tuple[str, str] | None = None) -> tuple[float, list[str]]:
    """The pair's cues and their score; `named_value`: its _named_value, which the caller read already."""
    score = 0.0
    reasons: list[str] = []
    sa, sb = subject_words
    # Each pair is named in alphabetical order, whichever side holds which word. Not an antonym:
    # two instructions (add / remove a collaborator); a literal's word (the "stop" property); two
    # choices a setting offers ("specify which tags are included" / "excluded"); nor
    # the words that tell the two subjects apart ("npm stop" / "npm start", "Enable 2FA" / "Disable 2FA").
    antonyms = sorted({tuple(sorted((p, q))) for p in x.tokens - y.tokens for q in ANTONYMS.get(p, ())
                       if q in y.tokens - x.tokens and not (p in x.actions and q in y.actions)
                       and p not in x.literal_words and q not in y.literal_words
                       and not (p in x.choice_words and q in y.choice_words)
                       and not (p in sa - sb and q in sb - sa)})
    if len(antonyms) == 1 and x.negated != y.negated:
        # "No pages are excluded" says what "all pages are included" says: one negation and one
        # antonym cancel, and the two agree.
        return 0.0, []
    if antonyms:
        score += W_ANTONYM
        reasons.append("antonyms: " + ", ".join(f"{p} / {q}" for p, q in antonyms[:3]))
    negated, other = (x, y) if x.negated else (y, x)
    if x.negated != y.negated and negated.negates & {stem(t) for t in other.tokens}:
        score += W_NEGATION
        reasons.append("negation: only " + ("a" if x.negated else "b") + " negates")
    # Each side must hold a number the other lacks: a copy cut short holds fewer, not other, numbers.
    if x.numbers - y.numbers and y.numbers - x.numbers:
        score += W_NUMBER
        reasons.append(f"numbers differ: {', '.join(sorted(x.numbers))} vs {', '.join(sorted(y.numbers))}")
    # The same sentence with another literal in the value's place: "returns a `Boolean`" / "returns
    # a `Promise<boolean>`". Not a value: a literal in the subject's place (within the first three
    # words: "The `and` function evaluates ..." / "The `or` function ...") or naming the section's own
    # subject says which thing is described; one right after "like", "such as", "e.g." is an
    # example (options like `--port` or `--open`); one spelled nearly alike is a typo fixed
    # (`assetInlineLimit` / `assetsInlineLimit`). Literals holding numbers are left to the numbers cue.
    same_template = x.template == y.template and len(x.literals) == len(y.literals)
    if x.literals and same_template and not any(r.startswith("numbers") for r in reasons):
        changed = [(i, p, q) for i, (p, q) in enumerate(zip(x.literals, y.literals)) if p != q]
        if len(changed) == 1:
            i, p, q = changed[0]
            slot = [m.start() for m in re.finditer("§", x.template)][i]
            named = set(_TOKEN.findall(p)) <= sa - sb and set(_TOKEN.findall(q)) <= sb - sa
            example = _EXAMPLE.search(x.template[:slot]) is not None
            respelled = SequenceMatcher(None, p, q).ratio() >= RESPELLED
            if len(x.template[:slot].split()) >= 3 and not (named or example or respelled):
                score += W_VALUE
                reasons.append(f"values differ: {p} vs {q}")
    if not reasons and named_value is not None:
        score += W_VALUE
        reasons.append(f"values differ: {named_value[0]} vs {named_value[1]}")
    if x.markers != y.markers and score:
        # A change marker alone is common prose; it only strengthens another cue.
        score += W_REVISION
        reasons.append("revision marker: " + ", ".join(sorted(x.markers ^ y.markers)))
    return score, reasons


# "Dana's manager is Priya Shah" / "... is Lukas Berg": one statement whose value, after "is", is
# another name. Only after a copula: "X is A" holds one value at a time, where "the user likes Vim"
# and "... likes Emacs" may both be true. The value is the sentence's tail past the copula's words,
# a name or a single word of at most NAMED_VALUE_WORDS words on each side, no function word in it
# ("is in the Alps" / "is near the lake" say two things about one cabin).
_COPULA = {"is", "are", "was", "were"}
NAMED_VALUE_WORDS = 3


def _value_words(value: str) -> frozenset[str]:
    """A named value's words, as written and stemmed (a sentence's words are stemmed)."""
    tokens = _TOKEN.findall(value.lower())
    return frozenset(tokens) | frozenset(stem(t) for t in tokens)


def _named_value(x: _Sentence, y: _Sentence) -> tuple[str, str] | None:
    """The two values of one copula statement that differ only in its named value, else None."""
    wx, wy = x.text.rstrip(".!;").split(), y.text.rstrip(".!;").split()
    if x.numbers or y.numbers or x.negated != y.negated:
        return None  # numbers and negation have their own cues
    n = 0
    while n < min(len(wx), len(wy)) and wx[n].lower() == wy[n].lower():
        n += 1
    head = [w.lower() for w in wx[:n]]
    if n < 3 or not _COPULA & set(head) or head[-1] in _NEGATIONS:
        return None
    vx, vy = wx[n:], wy[n:]
    if not (1 <= len(vx) <= NAMED_VALUE_WORDS and 1 <= len(vy) <= NAMED_VALUE_WORDS):
        return None
    tokens_x = [t for w in vx for t in _TOKEN.findall(w.lower())]
    tokens_y = [t for w in vy for t in _TOKEN.findall(w.lower())]
    if not tokens_x or not tokens_y or set(tokens_x) & set(tokens_y):
        return None
    if any(t in _STOP or t in _CUE_WORDS for t in tokens_x + tokens_y):
        return None
    p, q = " ".join(vx), " ".join(vy)
    if SequenceMatcher(None, p.lower(), q.lower()).ratio() >= RESPELLED:
        return None  # a typo fixed
    return p, q


# A value said to have changed: "The standup meeting moved to 10:00" after "The standup meeting is at 9:30",
# "The staging server was upgraded to Ubuntu 24.04" after "... runs Ubuntu 22.04". One sentence says its
# subject changed to a value (CHANGED_TO), the other states the same subject's value (STATED: a copula or
# a verb that takes a value; "Sara lives in Berlin" / "Sara moved to Munich"); the subject must name the
# same thing in a content word at least ("It moved to Friday" says not what moved), and both values must
# be values (_value_like): "The release branch is protected" and "... moved to main" are two facts. Or one
# sentence says "now" (or "instead", "no longer" ...: a revision marker) and otherwise repeats the other
# but for one value of at most NAMED_VALUE_WORDS words in the same place, with at least CHANGE_CONTEXT
# words around it: "We deploy on Tuesdays" / "We deploy on Thursdays now", "Dana works as a nurse" / "...
# as a teacher now", "Maria is the tech lead of the payments team" / "Jonas is now the tech lead ...".
# Without a marker, "likes Vim" / "likes Emacs" may both be true; with one, the newer says it replaced it.
_CHANGE_VERBS = (r"changed|moved|raised|lowered|increased|decreased|reduced|upgraded|downgraded|updated|bumped|"
                 r"switched|renamed|migrated|cut|extended|shortened|went\s+up|went\s+down")
CHANGED_TO = re.compile(rf"^(?P<subject>.+?)\s+(?:(?:has|have|had)\s+(?:been\s+)?|(?:was|were|got|is|are)\s+)?"
                        rf"(?P<verb>{_CHANGE_VERBS})(?:\s+from\s+.+?)?\s+to\s+(?P<value>.+?)(?:\s+now)?$", re.I)
STATED = re.compile(r"^(?P<subject>.+?)\s+(?:is|are|was|were|runs(?:\s+on)?|uses|costs|takes|lasts|meets|starts|"
                    r"lives|works|(?:is|are)\s+(?:based|located|hosted))"
                    r"\s+(?:(?:at|on|in|to|for|as)\s+)?(?P<value>.+?)$", re.I)
CHANGE_CONTEXT = 3
CHANGED_VALUE_WORDS = 5


class _Change(msgspec.Struct):
    a: str  # the first sentence's value
    b: str  # the second's
    how: str  # the change verb or the revision marker that says so


def _value_like(value: str) -> bool:
    """Whether a value is one a fact holds one of at a time: a number, a name or a code ("10:00",
    "Ubuntu 24.04", "Jonas", "tulip77"), not a state ("is protected" / "moved to main" say two things)."""
    return any(c.isdigit() for c in value) or any(w[:1].isupper() for w in value.split())


def _subject_of_statement(subject: str) -> frozenset[str]:
    return frozenset(stem(t) for t in _TOKEN.findall(subject.lower().replace("’", "'"))
                     if t not in _STOP and len(t) > 1 and not t.endswith("'s"))


@lru_cache(maxsize=4096)
def _statement(text: str) -> tuple[tuple[frozenset[str], str, str] | None, tuple[frozenset[str], str] | None]:
    """A sentence read as a change (its subject, its new value, its verb) and as a stated value (its
    subject, its value): each None when it is not one. Read once per sentence, not once per pair."""
    text = text.strip().rstrip(".!;")
    change, state = CHANGED_TO.match(text), STATED.match(text)
    return ((_subject_of_statement(change["subject"]), change["value"], " ".join(change["verb"].lower().split()))
            if change is not None else None,
            (_subject_of_statement(state["subject"]), state["value"]) if state is not None and change is None else None)


def _changed_value(x: _Sentence, y: _Sentence) -> _Change | None:
    """The two values of one thing when one sentence says it changed (see CHANGED_TO above), else None."""
    (change_x, state_x), (change_y, state_y) = _statement(x.text), _statement(y.text)
    for first, change, state in ((True, change_y, state_x), (False, change_x, state_y)):
        if change is None or state is None:
            continue
        subject, new, verb = change
        if not subject or subject != state[0]:
            continue
        old = state[1]
        if (old.lower() == new.lower() or len(old.split()) > CHANGED_VALUE_WORDS
                or len(new.split()) > CHANGED_VALUE_WORDS or not (_value_like(old) and _value_like(new))):
            continue
        return _Change(old, new, verb + " to") if first else _Change(new, old, verb + " to")
    return _marked_swap(x, y)


def _marked_swap(x: _Sentence, y: _Sentence) -> _Change | None:
    """One sentence repeating the other with a revision marker and one value swapped (see above)."""
    if x.markers == y.markers or x.negated != y.negated:
        return None
    marker_words = {w for m in x.markers ^ y.markers for w in m.rstrip(":").split()}

    def words(sentence: _Sentence) -> list[str]:
        return [w for w in sentence.text.strip().rstrip(".!;").split() if w.lower().strip(",") not in marker_words]

    wx, wy = words(x), words(y)
    n = 0
    while n < min(len(wx), len(wy)) and wx[n].lower() == wy[n].lower():
        n += 1
    m = 0
    while m < min(len(wx), len(wy)) - n and wx[-1 - m].lower() == wy[-1 - m].lower():
        m += 1
    vx, vy = wx[n:len(wx) - m], wy[n:len(wy) - m]
    if n + m < CHANGE_CONTEXT or not (1 <= len(vx) <= NAMED_VALUE_WORDS and 1 <= len(vy) <= NAMED_VALUE_WORDS):
        return None
    tokens = [t for w in vx + vy for t in _TOKEN.findall(w.lower())]
    if not tokens or any(t in _STOP or t in _CUE_WORDS for t in tokens):
        return None
    p, q = " ".join(vx), " ".join(vy)
    if SequenceMatcher(None, p.lower(), q.lower()).ratio() >= RESPELLED:
        return None
    if not _subject_of_statement(" ".join(wx[:n] + wx[len(wx) - m:])):
        return None
    return _Change(p, q, ", ".join(sorted(x.markers ^ y.markers)))


_DIFFER = re.compile(r"^(?:numbers|values) differ: (.+) vs (.+)$")


def value_change(reasons: list[str]) -> tuple[str, str] | None:
    """The value each side of a candidate states, (a's, b's), when the checker found one statement
    whose value differs (a number, a literal, or only one side negating) and nothing that says the
    two are about different things (its "different objects?", "different versions?" ... doubts):
    then the newer is a change of the older, not another fact. None otherwise."""
    if any(r.startswith("different ") for r in reasons):
        return None
    for reason in reasons:
        if m := _DIFFER.match(reason):
            # Several values differing at once ("crane 7 lifts 70" against "crane 8 lifts 80") are
            # another item of a series, not one value changed.
            if ", " in m.group(1) or ", " in m.group(2):
                return None
            return m.group(1), m.group(2)
        if reason.startswith("negation: only "):
            return ("no", "yes") if reason == "negation: only a negates" else ("yes", "no")
    return None


def _quote(text: str, limit: int = 160) -> str:
    text = " ".join(text.split())
    return '"' + (text if len(text) <= limit else text[:limit - 1] + "…") + '"'


def find_candidates(engine: Any, memory_ids: Iterable[str], *, k: int = NEIGHBORS,
                    min_similarity: float | None = None, threshold: float = THRESHOLD,
                    skip: Callable[[Memory, Memory], bool] | None = None,
                    progress: Callable[[int, int], None] | None = None) -> list[PendingContradiction]:
    """Contradiction candidates between each given memory and its k nearest neighbours.

    `engine` is a hebbs Engine (neighbors, get). `skip(a, b)` drops pairs that are not worth judging
    (for a vault: two chunks of one section, which overlap by design). Each unordered pair is judged once.
    `min_similarity`: the least cosine of a neighbour worth judging, by default the model's own
    (hebbs.models.calibration: 0.5 under MiniLM).
    """
    if min_similarity is None:
        min_similarity = calibration(engine.embedder.model_id).contradiction_similarity
    ids = list(dict.fromkeys(memory_ids))
    memories: dict[str, Memory | None] = {}
    # Each memory is read and split into sentences once per call, however often it is a neighbour.
    analyses: dict[str, tuple[_Sentence, ...]] = {}

    def memory(mid: str) -> Memory | None:
        if mid not in memories:
            try:
                memories[mid] = engine.get(mid)
            except NotFound:
                memories[mid] = None
        return memories[mid]

    def analysis(m: Memory) -> tuple[_Sentence, ...]:
        if m.id not in analyses:
            analyses[m.id] = _analyze.__wrapped__(m.content)
        return analyses[m.id]

    judged: set[frozenset[str]] = set()
    out: list[PendingContradiction] = []
    stamp = time.time_ns() // 1000
    for n, mid in enumerate(ids):
        if progress is not None and n % 256 == 0:
            progress(n, len(ids))
        try:
            hits = engine.neighbors(mid, k)
        except NotFound:
            continue
        a = memory(mid)
        if a is None:
            continue
        for other, similarity in hits:
            pair = frozenset((mid, other))
            if similarity < min_similarity or pair in judged:
                continue
            judged.add(pair)
            b = memory(other)
            if b is None or (skip is not None and skip(a, b)):
                continue
            verdict = _verdict(a.content, b.content, analysis(a), analysis(b), (subject_of(a), subject_of(b)))
            if verdict.confidence > threshold:
                out.append(PendingContradiction(
                    id=str(ULID()), memory_a=mid, memory_b=other, similarity=round(float(similarity), 4),
                    confidence=verdict.confidence, reasons=verdict.reasons, created_at=stamp))
    if progress is not None:
        progress(len(ids), len(ids))
    return out
