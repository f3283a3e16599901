"""The optional LLM: an OpenAI-compatible chat-completions server that does reflection's reasoning itself.

Nothing needs it. Without one, reflection and contradiction review run in two steps, the agent doing
the reasoning (reflect-prepare / reflect-commit, contradictions / contradictions commit); a
command that would need an LLM raises LLMNotConfigured, whose message says exactly that.

Configured by an `[llm]` table in $HEBBS_HOME/config.toml, overridden key by key by the vault's own
config.toml (hebbs.config.LLMConfig lists the keys). The API key is read from the environment
variable that `api_key_env` names, so no key is ever written to a file.

With one, `reflect_auto` asks it, per cluster, for insights (the cluster's prompt, within
PROPOSE_BUDGET tokens), then asks again, with the cluster and the proposals (within VALIDATE_BUDGET),
which of them the memories really support; those are committed. `contradiction_auto` asks it for a
verdict on each queued candidate and commits the confident ones. An answer that is not the JSON asked
for is reported in the result, never fatal. Rate limits (429), server errors and timeouts are retried
with exponential backoff (Retry-After honoured), then raised as LLMError: nothing is committed then.
"""

from __future__ import annotations

import json
import os
import re
import time
import urllib.parse
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from email.utils import parsedate_to_datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

import httpx
import msgspec

from .workflows import reflect
from . import validate
from .config import CONFIG_FILE, LLMConfig
from .errors import InvalidInput, LLMError, LLMNotConfigured
from .paths import hebbs_home
from .schema import (ClusterMember, ContradictionAutoResult, ContradictionCandidate, ContradictionCommitted,
                     ContradictionPrepared, ContradictionVerdict, InsightInput, ReflectAutoResult, ReflectCluster,
                     ReflectCommitted, ReflectPrepared)

if TYPE_CHECKING:
    from .core.open_vault import OpenVault



class Agent(Protocol):
    """What the driver drives: the Engine's prepare/commit calls, as any agent would make them.
    Typed by shape, not by import, so this module sits above the engine without a cycle."""

    path: Path
    vault: OpenVault

    def reflect_prepare(self, entity_id: str | None = None, since: Any = None,
                        max_memories: int = 500) -> ReflectPrepared: ...

    def reflect_commit(self, session_id: str, insights: Sequence[Any]) -> ReflectCommitted: ...

    def contradiction_prepare(self, max_results: int = 100) -> ContradictionPrepared: ...

    def contradiction_commit(self, verdicts: Sequence[Any]) -> ContradictionCommitted: ...

PROPOSE_BUDGET = 4000
VALIDATE_BUDGET = 6000
CLASSIFY_BUDGET = 2000
MAX_PROPOSALS = 5
RETRY_STATUS = frozenset({408, 409, 429, 500, 502, 503, 504})
MAX_RETRY_WAIT = 60.0
# A server that redirects more than this is misconfigured: the call fails instead of following on.
MAX_REDIRECTS = 10
SYSTEM = ("You help an AI agent keep its long-term memory in order. "
          "Answer with a single JSON object and nothing else.")

AGENT_PATH = (
    "Without an LLM, let your agent do the reasoning in two steps: `hebbs reflect-prepare` returns clusters of "
    "memories, each with a ready prompt; the agent answers them and `hebbs reflect-commit --file insights.json` "
    "stores the insights (likewise `hebbs contradictions` / `hebbs contradictions commit --file verdicts.json`). "
    "See docs/reflect.md.")


class BadAnswer(Exception):
    """The server answered, but not with what was asked for: reported, not raised to the caller."""


# Configuration -------------------------------------------------------------------------------

def settings(vault_path: os.PathLike | str) -> LLMConfig:
    """$HEBBS_HOME/config.toml [llm], then <vault>/config.toml [llm] on top, key by key."""
    merged: dict[str, Any] = {}
    files = [hebbs_home() / CONFIG_FILE, Path(vault_path) / CONFIG_FILE]
    for path in files:
        merged.update(_llm_table(path))
    try:
        return msgspec.convert(merged, LLMConfig)
    except msgspec.ValidationError as exc:
        raise InvalidInput(f"[llm] in {' / '.join(str(f) for f in files)}: {exc}") from None


def _llm_table(path: Path) -> dict[str, Any]:
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        return {}
    try:
        table = msgspec.toml.decode(raw).get("llm", {})
    except msgspec.DecodeError as exc:
        raise InvalidInput(f"{path}: {exc}") from None
    if not isinstance(table, dict):
        raise InvalidInput(f"{path}: llm must be a table ([llm])")
    return table


def client_for(engine: Agent) -> "ChatClient":
    """The vault's LLM client; LLMNotConfigured (pointing to the agent-driven path) when there is none."""
    config = settings(engine.path)
    missing = [name for name in ("base_url", "model") if not getattr(config, name)]
    if missing:
        raise LLMNotConfigured(
            f"no LLM is configured for the vault {engine.path} (llm.{' and llm.'.join(missing)} not set in "
            f"{hebbs_home() / CONFIG_FILE} or {Path(engine.path) / CONFIG_FILE}). {AGENT_PATH}")
    key = None
    if config.api_key_env:
        key = os.environ.get(config.api_key_env)
        if not key:
            raise LLMNotConfigured(
                f"the LLM's API key is read from the environment variable {config.api_key_env} "
                f"(llm.api_key_env), which is not set in this process. {AGENT_PATH}")
    return ChatClient(config, key)


# The HTTP client -----------------------------------------------------------------------------

class ChatClient:
    """POST {base_url}/chat/completions over httpx. Rate limits, server errors and timeouts are retried
    here (httpx retries no status); a redirect is followed only within the base URL's origin."""

    def __init__(self, config: LLMConfig, api_key: str | None, *,
                 sleep: Callable[[float], None] = time.sleep) -> None:
        assert config.base_url and config.model
        self.config = config
        self.url = config.base_url.rstrip("/") + "/chat/completions"
        self._key = api_key
        self._sleep = sleep
        host = urllib.parse.urlsplit(self.url).hostname or ""
        # A server on this machine (ollama, llama.cpp, vLLM) is never reached through a proxy.
        self._local = host in ("localhost", "::1") or host.startswith("127.")

    def complete(self, messages: list[dict[str, str]], max_tokens: int | None = None) -> str:
        """The answer's text. Raises LLMError when the server refuses or keeps failing, BadAnswer when
        its reply has no answer in it."""
        c = self.config
        body: dict[str, Any] = {"model": c.model, "messages": messages,
                                "max_tokens": max_tokens or c.max_answer_tokens}
        if c.json_mode:
            body["response_format"] = {"type": "json_object"}
        if c.temperature is not None:
            body["temperature"] = c.temperature
        data = json.dumps(body).encode()
        headers = {"Content-Type": "application/json", "Accept": "application/json", "User-Agent": "hebbs"}
        if self._key:
            headers["Authorization"] = f"Bearer {self._key}"
        last = ""
        # One connection pool per call, closed with it: the attempts and redirects of a call share it.
        with httpx.Client(timeout=c.timeout_seconds, trust_env=not self._local, follow_redirects=False) as http:
            for attempt in range(1, c.max_attempts + 1):
                wait: float | None = None
                try:
                    response = self._post(http, data, headers)
                except httpx.TimeoutException:
                    last = f"no answer within {c.timeout_seconds:g} s"
                except httpx.ConnectError as exc:
                    last = f"cannot connect: {exc}"
                except httpx.TransportError as exc:
                    last = f"connection failed: {exc!r}"
                else:
                    if response.is_success:
                        return answer_text(response.content)
                    detail = _excerpt(response.content)
                    if response.status_code not in RETRY_STATUS:
                        raise LLMError(f"the LLM at {self.url} refused the request: HTTP {response.status_code} "
                                       f"{detail}")
                    last = f"HTTP {response.status_code} {detail}".strip()
                    wait = _retry_after(response.headers.get("Retry-After"))
                if attempt < c.max_attempts:
                    backoff = c.backoff_seconds * 2 ** (attempt - 1)
                    self._sleep(min(MAX_RETRY_WAIT, backoff if wait is None else wait))
        raise LLMError(f"the LLM at {self.url} failed {c.max_attempts} times (rate limits, server errors and "
                       f"timeouts are retried); last: {last}. {AGENT_PATH}")

    def _post(self, http: httpx.Client, data: bytes, headers: dict[str, str]) -> httpx.Response:
        """The POST's final answer, its redirects followed as httpx builds them (307 and 308 repeat the
        POST, 301 to 303 become a GET) but only within the base URL's origin: elsewhere the request, and
        its Authorization header (the API key), would go to whatever address a 30x names."""
        request = http.build_request("POST", self.url, content=data, headers=headers)
        for _ in range(MAX_REDIRECTS + 1):
            response = http.send(request)
            following = response.next_request
            if following is None:
                return response
            target = str(following.url)
            if _origin(target) != _origin(self.url):
                raise LLMError(f"the LLM at {response.request.url} redirected (HTTP {response.status_code}) to "
                               f"another origin, {_origin_text(target)}; hebbs does not follow it, so the API key "
                               f"is not sent there. If that is the right server, set llm.base_url to it")
            request = following
        raise LLMError(f"the LLM at {self.url} redirected more than {MAX_REDIRECTS} times")

    def ask_json(self, user: str, max_tokens: int | None = None) -> Any:
        return parse_json_answer(self.complete([{"role": "system", "content": SYSTEM},
                                                {"role": "user", "content": user}], max_tokens))


def _origin(url: str) -> tuple[str, str, int | None]:
    parts = urllib.parse.urlsplit(url)
    scheme = parts.scheme.lower()
    return scheme, (parts.hostname or "").lower(), parts.port or {"http": 80, "https": 443}.get(scheme)


def _origin_text(url: str) -> str:
    scheme, host, port = _origin(url)
    return f"{scheme}://{host}:{port}"


def answer_text(payload: bytes) -> str:
    try:
        reply = json.loads(payload)
        content = reply["choices"][0]["message"]["content"]
    except (ValueError, KeyError, IndexError, TypeError):
        raise BadAnswer(f"the server's reply is not a chat completion: {_excerpt(payload)}") from None
    if isinstance(content, list):  # content parts
        content = "".join(p.get("text", "") for p in content if isinstance(p, dict))
    if not isinstance(content, str) or not content.strip():
        raise BadAnswer("the server's reply has an empty answer")
    return content


def parse_json_answer(text: str) -> Any:
    """The JSON in a model's answer: bare, in a ``` fence, or after some prose or a <think> block."""
    text = re.sub(r"<think>.*?</think>", "", text, flags=re.S).strip()
    fenced = re.search(r"```(?:json)?\s*(.*?)```", text, flags=re.S)
    candidates = [text] + ([fenced.group(1)] if fenced else [])
    starts = [i for i in (text.find("{"), text.find("[")) if i >= 0]
    if starts:
        start = min(starts)
        end = max(text.rfind("}"), text.rfind("]"))
        if end > start:
            candidates.append(text[start:end + 1])
    for candidate in candidates:
        try:
            return json.loads(candidate)
        except ValueError:
            continue
    raise BadAnswer(f"the answer is not JSON: {_excerpt(text)}")


def _retry_after(value: str | None) -> float | None:
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        return max(0.0, parsedate_to_datetime(value).timestamp() - time.time())
    except (TypeError, ValueError):
        return None


def _excerpt(raw: bytes | str, limit: int = 200) -> str:
    text = raw.decode(errors="replace") if isinstance(raw, bytes) else raw
    text = " ".join(text.split())
    return repr(text if len(text) <= limit else text[:limit] + "…")


# Reflect -------------------------------------------------------------------------------------

_VALIDATE_INSTRUCTIONS = """\
Answer with JSON only, in this form:
{"verdicts": [{"index": 1, "valid": true, "confidence": 0.8, "reason": "one sentence"}]}
- One verdict per proposed insight, by its number.
- valid: true only if the memories it cites really support it (not merely mention its topic) and it \
says something general rather than repeating one memory.
- confidence: from 0 to 1, how well supported it is."""


def reflect_auto(engine: Agent, *, entity_id: str | None = None, since: Any = None,
                 max_memories: int = reflect.MAX_MEMORIES) -> ReflectAutoResult:
    client = client_for(engine)  # first: without an LLM, say so before doing any work
    prepared = engine.reflect_prepare(entity_id=entity_id, since=since, max_memories=max_memories)
    total = len(prepared.clusters)
    jobs = [lambda c=c: _reflect_cluster(engine, client, c, total, entity_id) for c in prepared.clusters]
    outcomes = _run_all(jobs, client.config.concurrency)
    result = ReflectAutoResult(session_id=prepared.session_id, clusters=total, proposed=0, accepted=0)
    accepted: list[InsightInput] = []
    for proposed, kept, rejected, problems in outcomes:
        result.proposed += proposed
        accepted += kept
        result.rejected += rejected
        result.problems += problems
    result.accepted = len(accepted)
    if accepted:
        result.committed = engine.reflect_commit(prepared.session_id, accepted)
    return result


def _reflect_cluster(engine: Agent, client: ChatClient, cluster: ReflectCluster, total: int,
                     entity_id: str | None) -> tuple[int, list[InsightInput], list[str], list[str]]:
    """(proposed, accepted, rejected, problems) for one cluster: a proposing and a validating call."""
    label = f"cluster {cluster.index}"
    system = reflect.count_tokens(engine, [SYSTEM])[0]
    prompt = reflect.cluster_prompt(engine, cluster.memories, cluster.index, total, cluster.terms, entity_id,
                                    PROPOSE_BUDGET - system)[0]
    members = {m.id: m for m in cluster.memories}
    try:
        proposals, problems = _proposals(client.ask_json(prompt), members, label)
    except BadAnswer as exc:
        return 0, [], [], [f"{label}: proposing insights: {exc}"]
    if not proposals:
        return 0, [], [], problems
    try:
        verdicts = _verdicts(client.ask_json(_validation_prompt(engine, cluster, proposals, system)))
    except BadAnswer as exc:
        return len(proposals), [], [], problems + [f"{label}: validating insights: {exc}"]
    kept: list[InsightInput] = []
    rejected: list[str] = []
    for n, proposal in enumerate(proposals, 1):
        valid, confidence, reason = verdicts.get(n, (False, None, "the validating call gave no verdict for it"))
        if not valid:
            rejected.append(f"{label}: {proposal.content!r}: {reason or 'not supported by its sources'}")
            continue
        if confidence is not None:
            proposal = msgspec.structs.replace(proposal, confidence=round(min(proposal.confidence, confidence), 3))
        kept.append(proposal)
    return len(proposals), kept, rejected, problems


def _proposals(answer: Any, members: dict[str, ClusterMember], label: str) -> tuple[list[InsightInput], list[str]]:
    items = answer.get("insights") if isinstance(answer, dict) else answer
    if not isinstance(items, list):
        raise BadAnswer(f'expected {{"insights": [...]}}, got {_excerpt(json.dumps(answer))}')
    out: list[InsightInput] = []
    problems: list[str] = []
    if len(items) > MAX_PROPOSALS:
        problems.append(f"{label}: {len(items)} insights proposed; the first {MAX_PROPOSALS} were kept")
    for n, item in enumerate(items[:MAX_PROPOSALS], 1):
        where = f"{label}, proposal {n}"
        if not isinstance(item, dict) or not isinstance(item.get("content"), str) or not item["content"].strip():
            problems.append(f"{where}: no content: {_excerpt(json.dumps(item))}")
            continue
        confidence = _number(item.get("confidence", 0.5))
        if confidence is None or not 0.0 <= confidence <= 1.0:
            problems.append(f"{where}: confidence {item.get('confidence')!r} is not a number from 0 to 1")
            continue
        refs = item.get("source_memory_ids", item.get("sources", []))
        refs = refs if isinstance(refs, list) else [refs]
        sources = [s for s in (_resolve(r, members) for r in refs) if s is not None]
        unknown = [r for r in refs if _resolve(r, members) is None]
        if unknown:
            problems.append(f"{where}: ignored ids that are not in the cluster: {unknown[:5]}")
        if not sources:
            problems.append(f"{where}: cites none of the cluster's memories; dropped")
            continue
        tags = item.get("tags", [])
        tags = [str(t).strip() for t in (tags if isinstance(tags, list) else [tags]) if str(t).strip()][:10]
        out.append(InsightInput(content=item["content"].strip(), confidence=confidence,
                                source_memory_ids=list(dict.fromkeys(sources)), tags=tags))
    return out, problems


def _resolve(ref: Any, members: dict[str, ClusterMember]) -> str | None:
    """A cited memory: its full id, or an unambiguous tail of at least 6 characters of one."""
    if not isinstance(ref, str):
        return None
    ref = ref.strip().strip("[]`'\" ").upper()
    if ref in members:
        return ref
    if len(ref) >= 6:
        found = [mid for mid in members if mid.endswith(ref)]
        if len(found) == 1:
            return found[0]
    return None


def _validation_prompt(engine: Agent, cluster: ReflectCluster, proposals: list[InsightInput],
                       system_tokens: int) -> str:
    intro = ("Another model read the memories below, from an AI agent's memory, and proposed the insights listed "
             "after them. Check each insight against the memories it cites.\n\nMemories:")
    listed = "\n".join(f"{n}. {json.dumps(p.content[:reflect.MEMBER_CHARS], ensure_ascii=False)} (confidence "
                       f"{p.confidence:g}; cites {', '.join(p.source_memory_ids)})"
                       for n, p in enumerate(proposals, 1))
    outro = f"Proposed insights:\n{listed}\n\n{_VALIDATE_INSTRUCTIONS}"
    typical = sorted(cluster.memories, key=lambda m: (-m.centrality, m.id))
    lines = [reflect.member_line(m) for m in typical]
    return reflect.render_prompt(engine, intro, lines, outro, VALIDATE_BUDGET - system_tokens)[0]


def _verdicts(answer: Any) -> dict[int, tuple[bool, float | None, str]]:
    items = answer.get("verdicts") if isinstance(answer, dict) else answer
    if not isinstance(items, list):
        raise BadAnswer(f'expected {{"verdicts": [...]}}, got {_excerpt(json.dumps(answer))}')
    out: dict[int, tuple[bool, float | None, str]] = {}
    for n, item in enumerate(items, 1):
        if not isinstance(item, dict):
            continue
        index = _number(item.get("index", n))
        valid = item.get("valid")
        if isinstance(valid, str):
            valid = valid.strip().lower() in ("true", "yes", "valid")
        confidence = _number(item.get("confidence"))
        if confidence is not None and not 0.0 <= confidence <= 1.0:
            confidence = None
        if index is not None and float(index).is_integer():
            out[int(index)] = (valid is True, confidence, str(item.get("reason", "")).strip())
    return out


def _number(value: Any) -> float | None:
    if isinstance(value, bool):
        return None
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return number if number == number else None  # NaN is no number


# Contradictions ------------------------------------------------------------------------------

_CLASSIFY_INSTRUCTIONS = """\
Answer with JSON only, in this form:
{"verdict": "contradiction", "confidence": 0.8, "reason": "one sentence"}
- "contradiction": they cannot both be true, and the later one is not simply an update of the earlier.
- "revision": the later memory (B) updates or replaces what the earlier one (A) said.
- "neutral": they do not really conflict.
- confidence: from 0 to 1, how sure you are."""


def contradiction_auto(engine: Agent, *, max_results: int = 100,
                       min_confidence: float = 0.7) -> ContradictionAutoResult:
    client = client_for(engine)
    min_confidence = validate.unit_float(min_confidence, "min_confidence")
    candidates = engine.contradiction_prepare(max_results=max_results).candidates
    result = ContradictionAutoResult(reviewed=len(candidates))
    if not candidates:
        return result
    jobs = [lambda c=c: _classify(engine, client, c) for c in candidates]
    decided: list[ContradictionVerdict] = []
    for candidate, (verdict, problem) in zip(candidates, _run_all(jobs, client.config.concurrency)):
        if verdict is None:
            result.problems.append(f"candidate {candidate.pending_id}: {problem}")
            result.left_pending.append(candidate.pending_id)
        elif verdict.confidence < min_confidence:
            result.left_pending.append(candidate.pending_id)
        else:
            decided.append(verdict)
    if decided:
        result.committed = engine.contradiction_commit(decided)
    return result


def _classify(engine: Agent, client: ChatClient,
              candidate: ContradictionCandidate) -> tuple[ContradictionVerdict | None, str]:
    try:
        answer = client.ask_json(classification_prompt(engine, candidate))
    except BadAnswer as exc:
        return None, str(exc)
    if not isinstance(answer, dict):
        return None, f"expected a JSON object, got {_excerpt(json.dumps(answer))}"
    verdict = str(answer.get("verdict", "")).strip().lower()
    if verdict not in ("contradiction", "revision", "neutral"):
        return None, f"verdict {answer.get('verdict')!r} is not contradiction, revision or neutral"
    confidence = _number(answer.get("confidence"))
    if confidence is None or not 0.0 <= confidence <= 1.0:
        return None, f"confidence {answer.get('confidence')!r} is not a number from 0 to 1"
    return ContradictionVerdict(pending_id=candidate.pending_id, verdict=verdict, confidence=confidence,
                                note=str(answer.get("reason", "")).strip()[:500]), ""


def classification_prompt(engine: Agent, candidate: ContradictionCandidate) -> str:
    """Both memories, earlier first, cut until the prompt fits CLASSIFY_BUDGET."""
    earlier, later = sorted((candidate.memory_a, candidate.memory_b), key=lambda m: (m.created_at, m.id))
    system = reflect.count_tokens(engine, [SYSTEM])[0]
    limit = 2 * reflect.MEMBER_CHARS
    while True:
        def side(label: str, m: Any) -> str:
            text = " ".join(m.content.split())
            text = text if len(text) <= limit else text[:limit - 1] + "…"
            return f"{label} (recorded {reflect._iso(m.created_at)}): {text}"

        reasons = "; ".join(candidate.reasons[:3]) or "similar wording"
        prompt = ("Two memories from an AI agent's memory look as if they may conflict.\n\n"
                  f"{side('A', earlier)}\n\n{side('B', later)}\n\n"
                  f"A quick heuristic flagged them because: {reasons}.\n\n{_CLASSIFY_INSTRUCTIONS}")
        if reflect.count_tokens(engine, [prompt])[0] + system <= CLASSIFY_BUDGET or limit <= 100:
            return prompt
        limit //= 2


# Running calls side by side ------------------------------------------------------------------

def _run_all(jobs: list[Callable[[], Any]], concurrency: int) -> list[Any]:
    """Each job's result, in order; the first LLMError stops the rest and is raised."""
    if not jobs:
        return []
    pool = ThreadPoolExecutor(max_workers=max(1, min(concurrency, len(jobs))), thread_name_prefix="hebbs-llm")
    try:
        futures = [pool.submit(job) for job in jobs]
        return [f.result() for f in futures]
    finally:
        pool.shutdown(wait=True, cancel_futures=True)
