"""Time words in a cue ("last week", "in May 2023", "two days ago"), read as a time range.

A small deterministic grammar, no LLM and no dependency: every phrase it knows is listed below, and
each resolves against the recall's reference time (`now`) in UTC. Why not dateparser: its
`search_dates` took milliseconds per cue, read "may" in "I may have" as a month and "second" as a
date, and its answers moved between releases; a recall needs the same answer every time
(docs/recall.md, "Time words").

Only the past is understood: recall looks back, so "tomorrow" or "next week" read as nothing.
Words that are also ordinary English ("may", "march", a bare weekday, a bare number) count only in a
time context (a preposition, a year, a day of the month). A cue without any candidate word costs
one regular-expression search (`understand` returns at once).
"""

from __future__ import annotations

import calendar
import datetime as dt
import re
from dataclasses import dataclass

UTC = dt.timezone.utc
_EPOCH = dt.datetime(1970, 1, 1, tzinfo=UTC)  # memories are never older: "before 2024" starts here

_MONTHS = {name.lower(): i for i, name in enumerate(calendar.month_name) if name}
_MONTHS.update({name.lower(): i for i, name in enumerate(calendar.month_abbr) if name})
_MONTHS["sept"] = 9
_FULL_MONTHS = {name.lower() for name in calendar.month_name if name}
_WEEKDAYS = {name.lower(): i for i, name in enumerate(calendar.day_name)}
_NUMBERS = {"a": 1, "an": 1, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7,
            "eight": 8, "nine": 9, "ten": 10, "eleven": 11, "twelve": 12, "a couple of": 2, "a couple": 2,
            "couple of": 2, "a few": 3, "few": 3, "several": 3}
_UNITS = {"day": "day", "days": "day", "week": "week", "weeks": "week", "month": "month", "months": "month",
          "year": "year", "years": "year"}
_PARTS_OF_DAY = {"morning": (5, 12), "afternoon": (12, 18), "evening": (18, 24), "night": (18, 24)}


_MONTH = "|".join(sorted(_MONTHS, key=len, reverse=True))
_WEEKDAY = "|".join(_WEEKDAYS)
_NUMBER = r"\d{1,3}|" + "|".join(sorted((re.escape(n) for n in _NUMBERS), key=len, reverse=True))
_UNIT = "|".join(sorted(_UNITS, key=len, reverse=True))
_YEAR = r"(?:19|20|21)\d\d"
_DAY = r"(?:[12]\d|3[01]|0?[1-9])(?:st|nd|rd|th)?"

# The cheap pre-check: a cue without any of these words has no time phrase this module reads.
# A set lookup per word: about 10 times cheaper than one alternation regex over the whole cue.
_CANDIDATE_WORDS = frozenset(
    "today tonight yesterday ago last past previous this since before after until till earlier morning afternoon "
    "evening night week weeks weekend month months year years days".split()) | set(_WEEKDAYS) | set(_MONTHS)
_WORD = re.compile(r"[a-z]+|\d{4}")
_YEAR_WORD = "#year"  # stands for any four digits among a cue's words (_grammar's rules)


@dataclass(frozen=True)
class TimeRange:
    """What a cue's time phrase was read as: [start, end] in microseconds since the epoch, UTC."""

    phrase: str
    start: int
    end: int

    def text(self) -> str:
        return f"'{self.phrase}' read as {_show(self.start)}..{_show(self.end)}"


def _us(moment: dt.datetime) -> int:
    return int(round(moment.timestamp() * 1_000_000))


def _show(us: int) -> str:
    moment = dt.datetime.fromtimestamp(us / 1_000_000, UTC)
    if moment.hour == 0 and moment.minute == 0 and moment.second == 0 and moment.microsecond == 0:
        return moment.date().isoformat()
    if moment.hour == 23 and moment.minute == 59 and moment.second == 59:
        return moment.date().isoformat()
    return moment.strftime("%Y-%m-%d %H:%M")


# Calendar periods: each returns [first instant, last instant] of the period containing `day`.

def _day(day: dt.date) -> tuple[dt.datetime, dt.datetime]:
    start = dt.datetime(day.year, day.month, day.day, tzinfo=UTC)
    return start, start + dt.timedelta(days=1, microseconds=-1)


def _week(day: dt.date) -> tuple[dt.datetime, dt.datetime]:
    monday = day - dt.timedelta(days=day.weekday())  # ISO weeks start on Monday
    return _day(monday)[0], _day(monday + dt.timedelta(days=6))[1]


def _month(year: int, month: int) -> tuple[dt.datetime, dt.datetime]:
    last = calendar.monthrange(year, month)[1]
    return _day(dt.date(year, month, 1))[0], _day(dt.date(year, month, last))[1]


def _year(year: int) -> tuple[dt.datetime, dt.datetime]:
    return _day(dt.date(year, 1, 1))[0], _day(dt.date(year, 12, 31))[1]


def _shift_months(day: dt.date, months: int) -> dt.date:
    index = day.year * 12 + day.month - 1 - months
    year, month = divmod(index, 12)
    return dt.date(year, month + 1, min(day.day, calendar.monthrange(year, month + 1)[1]))


def _period(unit: str, day: dt.date) -> tuple[dt.datetime, dt.datetime]:
    if unit == "day":
        return _day(day)
    if unit == "week":
        return _week(day)
    if unit == "month":
        return _month(day.year, day.month)
    return _year(day.year)


def _back(unit: str, n: int, day: dt.date) -> dt.date:
    if unit == "day":
        return day - dt.timedelta(days=n)
    if unit == "week":
        return day - dt.timedelta(weeks=n)
    if unit == "month":
        return _shift_months(day, n)
    return _shift_months(day, 12 * n)


def _count(word: str) -> int | None:
    word = " ".join(word.lower().split())
    if word.isdigit():
        return int(word) if 0 < int(word) <= 500 else None
    return _NUMBERS.get(word)


def _last_weekday(name: str, today: dt.date) -> dt.date:
    """The most recent such weekday strictly before today ("since Monday" said on a Monday: a week ago)."""
    back = (today.weekday() - _WEEKDAYS[name.lower()]) % 7 or 7
    return today - dt.timedelta(days=back)


def _month_ok(word: str, has_day: bool, has_year: bool, has_prep: bool) -> bool:
    """Month names that are also English words ("may", "march") count with a year, or capitalized next
    to a day or after a preposition; abbreviations ("jan", "sept") only next to a day or a year."""
    lower = word.lower()
    if lower in ("may", "march"):
        return has_year or (word[:1].isupper() and (has_day or has_prep))
    if lower not in _FULL_MONTHS:
        return has_day or has_year
    return has_day or has_year or has_prep


def _latest_month(month: int, now: dt.datetime) -> int:
    """The year of the most recent such month not after now: "in December" said in May means last year's."""
    return now.year if month <= now.month else now.year - 1


# One anchored reading: a compiled pattern and what its match means, as (start, end) datetimes.
_Reading = tuple[dt.datetime, dt.datetime] | None


def _absolute(match: re.Match[str], now: dt.datetime, has_prep: bool) -> _Reading:
    """A date, month or year named outright: 2023-05-08, May 8(th) 2023, 8 May 2023, May 2023, 2022."""
    g = match.groupdict()
    try:
        if g.get("iso_y"):
            year, month = int(g["iso_y"]), int(g["iso_m"])
            if g.get("iso_d"):
                return _day(dt.date(year, month, int(g["iso_d"])))
            return _month(year, month)
        month_word = g.get("m1") or g.get("m2") or g.get("m3")
        day_word = g.get("d1") or g.get("d2")
        year_word = g.get("y1") or g.get("y2") or g.get("y3") or g.get("y4")
        if month_word:
            if not _month_ok(month_word, bool(day_word), bool(year_word), has_prep):
                return None
            month = _MONTHS[month_word.lower()]
            if day_word:
                day = int(re.sub(r"\D", "", day_word))
                year = int(year_word) if year_word else None
                if year is None:
                    candidate = dt.date(now.year, month, day)
                    year = now.year if candidate <= now.date() else now.year - 1
                return _day(dt.date(year, month, day))
            return _month(int(year_word) if year_word else _latest_month(month, now), month)
        if year_word and has_prep:  # a bare number is a year only after "in", "since", "before"...
            return _year(int(year_word))
    except ValueError:  # February 30th and the like: not a date, so not a time phrase
        return None
    return None


_ABSOLUTE = (
    rf"(?P<iso_y>{_YEAR})-(?P<iso_m>0[1-9]|1[0-2])(?:-(?P<iso_d>0[1-9]|[12]\d|3[01]))?\b"
    rf"|(?P<m1>{_MONTH})\.?\s+(?P<d1>{_DAY})\b(?:,?\s+(?P<y1>{_YEAR}))?"
    rf"|(?P<d2>{_DAY})(?:\s+of)?\s+(?P<m2>{_MONTH})\b\.?(?:,?\s+(?P<y2>{_YEAR}))?"
    rf"|(?P<m3>{_MONTH})\b\.?(?:,?\s+(?P<y3>{_YEAR}))?"
    rf"|(?P<y4>{_YEAR})\b"
)
_PREP = r"in|during|on|from|of|at"


def _grammar() -> list[tuple[re.Pattern[str], object, frozenset[str]]]:
    """The rules in order, each with the words one of which any phrase it reads contains: a rule
    none of whose words is in the cue is not searched (a paragraph cue paid every rule's search)."""
    weekdays, months = frozenset(_WEEKDAYS), frozenset(_MONTHS)
    rels = frozenset({"since", "after", "before", "until", "till"})
    rules: list[tuple[str, object, frozenset[str]]] = [
        (r"the\s+day\s+before\s+yesterday", lambda m, now: _day(now.date() - dt.timedelta(days=2)),
         frozenset({"yesterday"})),
        (r"yesterday\s+(?P<part>morning|afternoon|evening|night)", _yesterday_part, frozenset({"yesterday"})),
        (r"yesterday", lambda m, now: _day(now.date() - dt.timedelta(days=1)), frozenset({"yesterday"})),
        (r"last\s+night", lambda m, now: (_day(now.date() - dt.timedelta(days=1))[0] + dt.timedelta(hours=18),
                                           _day(now.date())[0] + dt.timedelta(hours=6)), frozenset({"night"})),
        (r"earlier\s+today", lambda m, now: (_day(now.date())[0], now), frozenset({"today"})),
        (r"(?:this|today)\s+(?P<part>morning|afternoon|evening)|(?P<tonight>tonight)", _today_part,
         frozenset({"morning", "afternoon", "evening", "tonight"})),
        (r"today", lambda m, now: (_day(now.date())[0], now), frozenset({"today"})),
        (rf"(?P<n>{_NUMBER})\s+(?P<unit>{_UNIT})\s+ago", _ago, frozenset({"ago"})),
        # Rolling spans up to now: "the last 3 days", "in the past month", "over the last year".
        (rf"(?:(?:in|over|during|within)\s+the\s+(?:last|past)|(?:the\s+)?past|(?:the\s+)?(?:last|previous)"
         rf"(?=\s+(?:{_NUMBER})\s))\s+(?:(?P<n>{_NUMBER})\s+)?(?P<unit>{_UNIT})", _last_n,
         frozenset({"last", "past", "previous"})),
        (r"(?:the\s+)?(?:last|past|previous)\s+weekend", _last_weekend, frozenset({"weekend"})),
        (r"this\s+weekend", _this_weekend, frozenset({"weekend"})),
        # Calendar periods: "last week" is Monday to Sunday of the week before this one.
        (r"(?:the\s+)?(?:last|previous)\s+(?P<unit>week|month|year)", _last_unit, frozenset({"last", "previous"})),
        (r"this\s+(?P<unit>week|month|year)", _this_unit, frozenset({"this"})),
        (rf"(?P<rel>since|after|before|until|till)\s+(?:last\s+)?(?P<wd>{_WEEKDAY})\b", _relative_weekday, weekdays),
        (rf"(?:on\s+|last\s+|this\s+past\s+)(?P<wd>{_WEEKDAY})(?:\s+(?P<part>morning|afternoon|evening|night))?",
         _weekday, weekdays),
        # A date always names a month or a year (four digits: _WORD reads those as words).
        (rf"(?P<rel>since|after|before|until|till)\s+(?:the\s+)?(?:{_ABSOLUTE})", _relative_absolute, rels),
        (rf"(?:(?:{_PREP})\s+(?:the\s+)?)?(?:{_ABSOLUTE})", _absolute_with_context, months | {_YEAR_WORD}),
    ]
    return [(re.compile(rf"\b(?:{pattern})(?!\w)", re.IGNORECASE), reader, words) for pattern, reader, words in rules]


def _yesterday_part(match: re.Match[str], now: dt.datetime) -> _Reading:
    lo, hi = _PARTS_OF_DAY[match["part"].lower()]
    day = _day(now.date() - dt.timedelta(days=1))[0]
    return day + dt.timedelta(hours=lo), day + dt.timedelta(hours=hi, microseconds=-1)


def _today_part(match: re.Match[str], now: dt.datetime) -> _Reading:
    lo, hi = _PARTS_OF_DAY["evening" if match["tonight"] else match["part"].lower()]
    day = _day(now.date())[0]
    return day + dt.timedelta(hours=lo), day + dt.timedelta(hours=hi, microseconds=-1)


def _ago(match: re.Match[str], now: dt.datetime) -> _Reading:
    n = _count(match["n"])
    if n is None:
        return None
    unit = _UNITS[match["unit"].lower()]
    return _period(unit, _back(unit, n, now.date()))


def _last_n(match: re.Match[str], now: dt.datetime) -> _Reading:
    n = _count(match["n"]) if match["n"] else 1
    if n is None:
        return None
    unit = _UNITS[match["unit"].lower()]
    return _day(_back(unit, n, now.date()))[0], now


def _last_weekend(match: re.Match[str], now: dt.datetime) -> _Reading:
    saturday = now.date() - dt.timedelta(days=(now.weekday() - 5) % 7 or 7)
    if saturday + dt.timedelta(days=1) >= now.date():  # on Saturday or Sunday, "last weekend" is the one before
        saturday -= dt.timedelta(days=7)
    return _day(saturday)[0], _day(saturday + dt.timedelta(days=1))[1]


def _this_weekend(match: re.Match[str], now: dt.datetime) -> _Reading:
    if now.weekday() < 5:  # a weekend still ahead is the future: nothing to recall
        return None
    saturday = now.date() - dt.timedelta(days=now.weekday() - 5)
    return _day(saturday)[0], now


def _last_unit(match: re.Match[str], now: dt.datetime) -> _Reading:
    unit = match["unit"].lower()
    return _period(unit, _back(unit, 1, now.date()))


def _this_unit(match: re.Match[str], now: dt.datetime) -> _Reading:
    unit = match["unit"].lower()
    return _period(unit, now.date())[0], now


def _relative_weekday(match: re.Match[str], now: dt.datetime) -> _Reading:
    start, end = _day(_last_weekday(match["wd"], now.date()))
    return _open(match["rel"], start, end, now)


def _weekday(match: re.Match[str], now: dt.datetime) -> _Reading:
    start, end = _day(_last_weekday(match["wd"], now.date()))
    if match["part"]:
        lo, hi = _PARTS_OF_DAY[match["part"].lower()]
        return start + dt.timedelta(hours=lo), start + dt.timedelta(hours=hi, microseconds=-1)
    return start, end


def _relative_absolute(match: re.Match[str], now: dt.datetime) -> _Reading:
    reading = _absolute(match, now, has_prep=True)
    return None if reading is None else _open(match["rel"], *reading, now)


def _absolute_with_context(match: re.Match[str], now: dt.datetime) -> _Reading:
    has_prep = bool(re.match(rf"(?:{_PREP})\b", match.group(0), re.IGNORECASE))
    return _absolute(match, now, has_prep)


def _open(rel: str, start: dt.datetime, end: dt.datetime, now: dt.datetime) -> _Reading:
    rel = rel.lower()
    if rel == "since":
        return start, now
    if rel == "after":
        return end + dt.timedelta(microseconds=1), now
    return _EPOCH, start - dt.timedelta(microseconds=1)  # before, until


_RULES = _grammar()


def understand(cue: str, now_us: int) -> TimeRange | None:
    """The first time phrase in `cue` read as a range ending no later than now, or None.

    A phrase that reads as the future, or as nothing that exists (February 30th), is ignored.
    """
    words = set(_WORD.findall(cue.lower()))
    if not any(word in _CANDIDATE_WORDS or word.isdigit() for word in words):
        return None
    if any(word.isdigit() for word in words):
        words.add(_YEAR_WORD)
    now = dt.datetime.fromtimestamp(now_us / 1_000_000, UTC)
    best: tuple[int, int, TimeRange] | None = None
    for pattern, reader, needs in _RULES:
        if needs.isdisjoint(words):
            continue
        for match in pattern.finditer(cue):
            if best is not None and match.start() > best[0]:
                break
            reading = reader(match, now)  # type: ignore[operator]
            if reading is None:
                continue
            start, end = reading
            if start > now or end < start:
                continue
            found = TimeRange(" ".join(match.group(0).split()), _us(start), min(_us(end), now_us))
            # The earliest phrase wins; at the same place, the longest ("May 8 2023" over "May 8").
            key = (match.start(), -(match.end() - match.start()))
            if best is None or key < (best[0], best[1]):
                best = (key[0], key[1], found)
            break
    return None if best is None else best[2]
