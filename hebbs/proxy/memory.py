"""What the proxy recalls for a chat request, how it shows it to the model, and how it remembers."""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
import math
from pathlib import Path
from typing import Any

import msgspec
from ulid import ULID

from ..client import AsyncClient
from ..errors import HebbsError
from ..paths import init_vault
from ..schema import RecallResult

log = logging.getLogger("hebbs.proxy")
MAX_CUE_CHARS = 2000  # a pasted log is not a better cue than its first lines
ORIGIN = "proxy"
# Remembered exchanges are not sources: they live in a vault of their own beside the project vault
# (<project>/.hebbs/exchanges/.hebbs, or $HEBBS_HOME/exchanges/.hebbs), so a notes question asked of
# the project vault finds the notes; their context type says what they are.
EXCHANGE_TYPE = "exchange"
EXCHANGES_DIR = "exchanges"
# Where earlier exchanges go among what the proxy adds: after the sources, first, or not at all.
EXCHANGE_PLACES = ("after", "first", "off")
# Sources that fill top_k must not crowd out every earlier exchange: relevant exchanges keep at least
# a quarter of the slots (at least one), and take any the sources leave free.
EXCHANGE_SHARE = 0.25
# A request names the agent and the session (conversation) its exchange is remembered under with
# protocol.AGENT_HEADER and SESSION_HEADER; without the session header, the conversation's opening names
# it (conversation_id).


class Scope(msgspec.Struct, kw_only=True, frozen=True):
    """The agent and session a remembered exchange is stored under (schema.Memory's)."""

    agent: str | None = None
    session: str | None = None


def conversation_id(messages: list[Any]) -> str | None:
    """A session for a conversation that names none: each request of a chat repeats its history, so the
    messages up to its first user message are the same in every request of it (and differ between chats
    that open differently: two that open with the very same words share one; X-Hebbs-Session tells them apart)."""
    opening: list[Any] = []
    for message in messages:
        opening.append(message)
        if isinstance(message, dict) and message.get("role") == "user":
            text = json.dumps(opening, sort_keys=True, ensure_ascii=False, default=str)
            return "chat-" + hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:16]
    return None


def exchange_slots(top_k: int, sources: int, earlier: int) -> int:
    """How many of top_k slots go to earlier exchanges when `sources` sources and `earlier` earlier
    exchanges passed the threshold: their share (a quarter of top_k, rounded up), more when the
    sources leave slots free, never more than there are."""
    share = math.ceil(top_k * EXCHANGE_SHARE)
    return min(earlier, max(share, top_k - sources))


class Found(msgspec.Struct, kw_only=True):
    """One recalled memory the proxy adds to the conversation."""

    id: str
    brain: str  # "project" or "global"
    confidence: float
    content: str
    file: str | None = None
    heading: str | None = None
    asked_before: bool = False  # a user message an earlier exchange through the proxy stored
    # An older value: the memory that changed it (recall's `newer`), and what changed ("2 -> 3").
    newer: str | None = None
    change: str | None = None
    # Memories a contradiction verdict says this one disagrees with.
    conflicts_with: list[str] = []


class Recalled(msgspec.Struct, kw_only=True):
    found: list[Found] = []
    abstained: bool = False  # every brain asked abstained (or had nothing)


class Brains:
    """The project vault and the global brain, through the daemon (either may be absent), and the
    vault of remembered exchanges (`exchanges`, made at the first one remembered)."""

    def __init__(self, project: AsyncClient | None, global_brain: AsyncClient | None,
                 exchanges: AsyncClient | None = None, exchange_place: str = "after") -> None:
        self.project = project
        self.global_brain = global_brain
        if project is not None and global_brain is not None and project.vault_path == global_brain.vault_path:
            self.global_brain = None  # no project vault here: the "project" is the global brain itself
        self.exchanges = exchanges
        self.exchange_place = exchange_place

    def named(self) -> list[tuple[str, AsyncClient]]:
        return [(name, c) for name, c in (("project", self.project), ("global", self.global_brain)) if c is not None]

    async def recall(self, message: str, top_k: int) -> Recalled:
        """What the sources say (_sources), and what the user asked in earlier exchanges, placed after
        the sources (keeping their share of top_k: exchange_slots), first (ahead of the sources), or
        left out (exchange_place)."""
        if self.exchanges is None or self.exchange_place == "off":
            return await self._sources(message, top_k)
        sources, earlier = await asyncio.gather(self._sources(message, top_k), self._earlier(message, top_k))
        if self.exchange_place == "first":
            ordered = (earlier + sources.found)[:top_k]
        else:
            kept = exchange_slots(top_k, len(sources.found), len(earlier))
            ordered = sources.found[:top_k - kept] + earlier[:kept]
        return Recalled(found=ordered, abstained=not ordered)

    async def _earlier(self, message: str, top_k: int) -> list[Found]:
        """What the user asked in earlier exchanges that passes recall's threshold (never a model's answer)."""
        assert self.exchanges is not None
        try:
            answer = await self.exchanges.recall(message[:MAX_CUE_CHARS], top_k=2 * top_k)
        except HebbsError as exc:
            log.warning("recall in the exchanges vault failed: %s", exc)
            return []
        if answer.abstained:
            return []
        said, threshold = _normalized(message), answer.threshold or 0.0
        brain = "project" if self.project is not None else "global"
        return [_found(brain, r) for r in answer.results
                if r.confidence is not None and r.confidence >= threshold and not _echo(r, said)][:top_k]

    async def _sources(self, message: str, top_k: int) -> Recalled:
        """One recall over both brains (the SDK's `brains=`: the daemon embeds the cue once and merges the
        two lists on comparable scores); what passes the confidence threshold, in the merged order."""
        cue = message[:MAX_CUE_CHARS]
        said = _normalized(message)  # the whole message, not the cue: a long one stored earlier is still itself
        brains = self.named()
        if not brains:
            return Recalled(abstained=True)
        asker = brains[0][1]
        try:
            # Over-fetched: what the proxy itself stored may be left out below.
            if len(brains) == 1:
                answer = await asker.recall(cue, top_k=2 * top_k)
            else:
                answer = await asker.recall(cue, top_k=2 * top_k, brains=[name for name, _ in brains])
        except HebbsError as exc:
            if len(brains) == 1:
                log.warning("recall in the %s brain failed: %s", brains[0][0], exc)
                return Recalled(abstained=True)
            # One damaged or locked brain must not silence the other: ask each alone.
            log.warning("recall over both brains failed (%s); asking each brain alone", exc)
            return await self._each(cue, said, top_k, brains)
        if answer.abstained:
            return Recalled(abstained=True)
        threshold = answer.threshold or 0.0
        found = [_found(_brain_of(r, brains[0][0]), r) for r in answer.results
                 if r.confidence is not None and r.confidence >= threshold and not _echo(r, said)]
        return Recalled(found=found[:top_k], abstained=not found)

    async def _each(self, cue: str, said: str, top_k: int, brains: list[tuple[str, AsyncClient]]) -> Recalled:
        answers = await asyncio.gather(*(c.recall(cue, top_k=2 * top_k) for _, c in brains), return_exceptions=True)
        found: list[Found] = []
        for (name, _), answer in zip(brains, answers):
            if isinstance(answer, HebbsError):
                log.warning("recall in the %s brain failed: %s", name, answer)
                continue
            if isinstance(answer, BaseException):
                raise answer
            if answer.abstained:
                continue
            threshold = answer.threshold or 0.0
            found += [_found(name, r) for r in answer.results
                      if r.confidence is not None and r.confidence >= threshold and not _echo(r, said)]
        found.sort(key=lambda f: f.confidence, reverse=True)
        return Recalled(found=found[:top_k], abstained=not found)

    async def remember(self, question: str, answer: str, *, model: str | None, recalled: list[str],
                       scope: Scope | None = None) -> list[str]:
        """The user's message and the assistant's answer, linked by one exchange id, in the exchanges
        vault, stored by the scope's agent and session (the client's own where it names none); returns
        their ids. Never folded into an earlier memory with the same text: two exchanges that got the
        same answer are two answers, each replying to its own question."""
        target = self.exchanges or self.project or self.global_brain
        if target is None or not question.strip():
            return []
        exchange = str(ULID())
        base: dict[str, Any] = {"type": EXCHANGE_TYPE, "origin": ORIGIN, "exchange": exchange}
        if model:
            base["model"] = model
        scope = scope or Scope()
        who = {k: v for k, v in (("agent", scope.agent), ("session", scope.session)) if v}
        [asked] = await target.remember_many([{"content": question, "context": {**base, "role": "user",
                                                                                 "recalled": recalled}, **who}],
                                             consolidate=False)
        ids = [asked.id]
        if answer.strip():
            [said] = await target.remember_many([{"content": answer, "context": {**base, "role": "assistant",
                                                                                "reply_to": asked.id}, **who}],
                                                consolidate=False)
            ids.append(said.id)
        return ids


def exchanges_root(brain_vault: Path | str) -> Path:
    """The folder holding the vault of the exchanges remembered beside a brain's vault directory."""
    return Path(brain_vault) / EXCHANGES_DIR


def ensure_exchanges(brain_vault: Path | str, home: Path) -> Path:
    root = exchanges_root(brain_vault)
    root.mkdir(mode=0o700, exist_ok=True)
    init_vault(root, home)
    return root


def _normalized(text: str) -> str:
    # A client may send the same message again with other line breaks or spacing.
    return " ".join(text.split())


def _echo(r: RecallResult, said: str) -> bool:
    """What adds nothing to the conversation: the very message being answered (`said`, normalized),
    stored by an earlier exchange, and an earlier answer of a model (what the user said is memory; what
    a model said is not evidence, and citing it would feed a model its own guesses back)."""
    memory = r.memory
    if _normalized(memory.content) == said:
        return True
    return memory.context.get("origin") == ORIGIN and memory.context.get("role") == "assistant"


def _brain_of(r: RecallResult, single: str) -> str:
    """The brain a merged result came from (its `vault` label); a one-brain answer carries none."""
    return r.vault if isinstance(r.vault, str) else single


def _found(brain: str, r: RecallResult) -> Found:
    source = r.memory.source
    ctx = r.memory.context
    file = source.file_path if source is not None else ctx.get("file")
    heading_path = (source.heading_path if source is not None else None) or ctx.get("heading_path") or []
    newer = None if r.current else r.newer
    return Found(id=r.memory.id, brain=brain, confidence=round(float(r.confidence or 0.0), 4),
                 content=r.memory.content, file=file, heading=" > ".join(heading_path) or None,
                 asked_before=ctx.get("origin") == ORIGIN and ctx.get("role") == "user", newer=newer,
                 change=r.memory.value_change if newer is not None and newer == r.memory.newer_value else None,
                 conflicts_with=list(r.conflicts_with))


def system_message(found: list[Found]) -> dict[str, str]:
    lines = ["Memories hebbs recalled for the user's latest message. Use them only if they are relevant; "
             "cite a memory by its id in square brackets, e.g. [" + found[0].id + "], when you rely on it."]
    for f in found:
        where = f"{f.brain} brain"
        if f.file:
            where += f", {f.file}" + (f" > {f.heading}" if f.heading else "")
        if f.asked_before:
            where += ", asked by the user in an earlier chat"
        # Said in the line itself: two values of one fact shown as two plain memories read as two facts.
        if f.newer is not None:
            where += (f"; OLDER VALUE ({f.change}), no longer current: [{f.newer}] is newer" if f.change
                      else f"; OUTDATED: replaced by [{f.newer}]")
        if f.conflicts_with:
            where += ("; CONFLICT: disagrees with " + ", ".join(f"[{other}]" for other in f.conflicts_with)
                      + ", which is true is not known")
        lines.append(f"[{f.id}] ({where}; confidence {f.confidence:.2f}) {f.content}")
    return {"role": "system", "content": "\n".join(lines)}


def latest_user_text(messages: Any) -> str | None:
    """The text of the last user message (string content, or the text parts of a list)."""
    if not isinstance(messages, list):
        return None
    for message in reversed(messages):
        if isinstance(message, dict) and message.get("role") == "user":
            content = message.get("content")
            if isinstance(content, str):
                return content
            if isinstance(content, list):
                parts = [p.get("text", "") for p in content if isinstance(p, dict) and p.get("type") == "text"]
                return "\n".join(p for p in parts if isinstance(p, str)) or None
            return None
    return None


def with_memories(messages: list[Any], message: dict[str, str]) -> list[Any]:
    """The memories go after the client's own leading system messages (some chat templates accept
    system messages only at the start)."""
    at = 0
    while at < len(messages) and isinstance(messages[at], dict) and messages[at].get("role") in ("system", "developer"):
        at += 1
    return [*messages[:at], message, *messages[at:]]
