"""Time words in a cue, read against fixed reference times (hebbs/recall/timewords.py)."""

from __future__ import annotations

import datetime as dt

import pytest

from hebbs.recall.timewords import understand

UTC = dt.timezone.utc
WEDNESDAY = dt.datetime(2023, 5, 10, 15, 30, tzinfo=UTC)  # 2023-05-10 is a Wednesday


def us(moment: dt.datetime) -> int:
    return int(moment.timestamp() * 1_000_000)


def read(cue: str, now: dt.datetime = WEDNESDAY) -> tuple[str, str] | None:
    found = understand(cue, us(now))
    if found is None:
        return None
    show = lambda t: dt.datetime.fromtimestamp(t / 1e6, UTC).strftime("%Y-%m-%d %H:%M")  # noqa: E731
    return show(found.start), show(found.end)


@pytest.mark.parametrize("cue, start, end", [
    ("what did we decide last week", "2023-05-01 00:00", "2023-05-07 23:59"),
    ("yesterday", "2023-05-09 00:00", "2023-05-09 23:59"),
    ("the day before yesterday", "2023-05-08 00:00", "2023-05-08 23:59"),
    ("yesterday evening", "2023-05-09 18:00", "2023-05-09 23:59"),
    ("last night", "2023-05-09 18:00", "2023-05-10 06:00"),
    ("this morning", "2023-05-10 05:00", "2023-05-10 11:59"),
    ("earlier today", "2023-05-10 00:00", "2023-05-10 15:30"),
    ("today", "2023-05-10 00:00", "2023-05-10 15:30"),
    ("two days ago", "2023-05-08 00:00", "2023-05-08 23:59"),
    ("a couple of days ago", "2023-05-08 00:00", "2023-05-08 23:59"),
    ("3 weeks ago", "2023-04-17 00:00", "2023-04-23 23:59"),
    ("a month ago", "2023-04-01 00:00", "2023-04-30 23:59"),
    ("two years ago", "2021-01-01 00:00", "2021-12-31 23:59"),
    ("in the last 3 days", "2023-05-07 00:00", "2023-05-10 15:30"),
    ("the past few weeks", "2023-04-19 00:00", "2023-05-10 15:30"),
    ("in the past month", "2023-04-10 00:00", "2023-05-10 15:30"),
    ("last month", "2023-04-01 00:00", "2023-04-30 23:59"),
    ("last year", "2022-01-01 00:00", "2022-12-31 23:59"),
    ("this week", "2023-05-08 00:00", "2023-05-10 15:30"),
    ("this month", "2023-05-01 00:00", "2023-05-10 15:30"),
    ("this year", "2023-01-01 00:00", "2023-05-10 15:30"),
    ("last weekend", "2023-05-06 00:00", "2023-05-07 23:59"),
    ("since Monday", "2023-05-08 00:00", "2023-05-10 15:30"),
    ("on Tuesday", "2023-05-09 00:00", "2023-05-09 23:59"),
    ("last Friday", "2023-05-05 00:00", "2023-05-05 23:59"),
    ("on Monday morning", "2023-05-08 05:00", "2023-05-08 11:59"),
    ("in May 2023", "2023-05-01 00:00", "2023-05-10 15:30"),
    ("in April 2023", "2023-04-01 00:00", "2023-04-30 23:59"),
    ("in May", "2023-05-01 00:00", "2023-05-10 15:30"),
    ("in December", "2022-12-01 00:00", "2022-12-31 23:59"),  # the most recent December
    ("May 8th", "2023-05-08 00:00", "2023-05-08 23:59"),
    ("on 8 May 2023", "2023-05-08 00:00", "2023-05-08 23:59"),
    ("March 3, 2022", "2022-03-03 00:00", "2022-03-03 23:59"),
    ("jan 2023", "2023-01-01 00:00", "2023-01-31 23:59"),
    ("2023-04-03", "2023-04-03 00:00", "2023-04-03 23:59"),
    ("in 2022", "2022-01-01 00:00", "2022-12-31 23:59"),
    ("before 2023", "1970-01-01 00:00", "2022-12-31 23:59"),
    ("since March", "2023-03-01 00:00", "2023-05-10 15:30"),
    ("after April 2023", "2023-05-01 00:00", "2023-05-10 15:30"),
    ("until 2020", "1970-01-01 00:00", "2019-12-31 23:59"),
])
def test_phrases(cue: str, start: str, end: str) -> None:
    assert read(cue) == (start, end)


def test_the_phrase_and_its_reading_are_reported() -> None:
    found = understand("what did Ana say about the move last week?", us(WEDNESDAY))
    assert found is not None and found.phrase == "last week"
    assert found.text() == "'last week' read as 2023-05-01..2023-05-07"


def test_weeks_start_on_monday() -> None:
    sunday = dt.datetime(2023, 5, 14, 20, 0, tzinfo=UTC)
    monday = dt.datetime(2023, 5, 15, 8, 0, tzinfo=UTC)
    assert read("this week", sunday) == ("2023-05-08 00:00", "2023-05-14 20:00")
    assert read("last week", sunday) == ("2023-05-01 00:00", "2023-05-07 23:59")
    assert read("last week", monday) == ("2023-05-08 00:00", "2023-05-14 23:59")


def test_since_monday_said_on_a_monday_means_a_week_ago() -> None:
    monday = dt.datetime(2023, 5, 15, 8, 0, tzinfo=UTC)
    assert read("since Monday", monday) == ("2023-05-08 00:00", "2023-05-15 08:00")
    assert read("on Monday", monday) == ("2023-05-08 00:00", "2023-05-08 23:59")


def test_month_and_year_boundaries() -> None:
    new_year = dt.datetime(2024, 1, 1, 9, 0, tzinfo=UTC)  # a Monday
    assert read("yesterday", new_year) == ("2023-12-31 00:00", "2023-12-31 23:59")
    assert read("last month", new_year) == ("2023-12-01 00:00", "2023-12-31 23:59")
    assert read("last year", new_year) == ("2023-01-01 00:00", "2023-12-31 23:59")
    assert read("last week", new_year) == ("2023-12-25 00:00", "2023-12-31 23:59")
    march = dt.datetime(2024, 3, 31, 12, 0, tzinfo=UTC)
    assert read("a month ago", march) == ("2024-02-01 00:00", "2024-02-29 23:59")  # leap year, clamped day
    assert read("in February", march) == ("2024-02-01 00:00", "2024-02-29 23:59")


@pytest.mark.parametrize("cue", [
    "I may have left the keys at home",          # "may" as a verb
    "May I ask what the deploy key is?",
    "in may",                                      # lowercase and alone: too likely the verb
    "they march on",
    "Monday standup notes",                        # a weekday alone names a routine, not a date
    "the last time we met",
    "at last the build passed",
    "error 2022 in the parser",                    # a number is a year only after a preposition
    "next week",                                   # the future: recall looks back
    "tomorrow",
    "in 3 days",
    "in 2031",
    "this weekend",                                # on a Wednesday, still ahead
    "Feb 30 2023",                                 # no such day
    "how do I rotate the deploy key",
])
def test_not_time_phrases(cue: str) -> None:
    assert read(cue) is None


def test_the_earliest_and_then_the_longest_phrase_wins() -> None:
    assert understand("yesterday morning and last week", us(WEDNESDAY)).phrase == "yesterday morning"
    assert understand("since May 8, 2023", us(WEDNESDAY)).phrase == "since May 8, 2023"


def test_cheap_precheck() -> None:
    assert understand("how do I rotate the deploy key", us(WEDNESDAY)) is None
    assert understand("deploy key last week", us(WEDNESDAY)) is not None
    assert understand("notes from 2022", us(WEDNESDAY)) is not None
