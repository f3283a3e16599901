"""One recall, from the caller's options to a ranked and judged answer.

`plan` checks the options and decides which strategies run; `run` merges their candidates, scores
them (recall/scoring.py), diversifies with MMR, keeps superseded memories below their successors and
judges each result's confidence (recall/confidence.py). Logging the query, and reinforcing when the
caller asks, are writes: the facade does them afterwards (workflows/reinforce.py).
"""

from __future__ import annotations

import dataclasses
import heapq
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import cast

import msgspec
import numpy as np

from .. import timefmt, validate
from ..config import RecallConfig
from ..errors import InvalidInput, NotFound
from ..models import calibration
from ..schema import (Memory, Origin, RecallResult, RecallResults, ScoreComponents, ScoringWeights, TimeUnderstood)
from ..core.memory_text import lexical_text
from ..core.open_vault import OpenVault, now_us
from . import background, confidence, registry, scoring, timewords
from . import fusion as rc
from .options import POOL_FACTOR, RecallOptions, pooled
from .query import CueEmbedder, Query, cached_memories, cached_vectors

DEFAULT_WEIGHTS = ScoringWeights()
MMR_POOL_EXTRA = 30


@dataclass
class Request:
    """A recall's options, checked, and what follows from them: what `run` needs and what the query log
    records. In `options`, the cue, weights (a ScoringWeights), entity, seed, alpha (None unless
    analogical runs) and mmr_lambda (the vault's default when not given) are the checked values."""
    options: RecallOptions
    names: set[str]
    window: tuple[int, int] | None
    reference: int  # "now" for recency and time words
    understood: timewords.TimeRange | None
    as_of: int | None = None  # the point in time asked about: what was true then


def mmr_pool(top_k: int) -> int:
    """How many of the best-scored candidates MMR picks its top_k from."""
    return min(top_k * POOL_FACTOR, top_k + MMR_POOL_EXTRA)


def plan(vault: OpenVault, options: RecallOptions) -> Request:
    """Check a recall's options (InvalidInput / NotFound on bad ones) and pick its strategies."""
    o = options
    top_k = validate.top_k(o.top_k)
    weights = scoring.check_weights(o.weights or DEFAULT_WEIGHTS)
    entity_id = validate.entity(o.entity_id)
    origin = {name: validate.scope_name(getattr(o, name), name) for name in ("author", "agent", "session")}
    window = validate.time_range(o.time_range)
    as_of = validate.timestamp_us(o.as_of, "as_of")
    if as_of is not None:
        # Nothing created after the point in time; with a range, the part of it up to then.
        window = (0, as_of) if window is None else (window[0], min(window[1], as_of))
    # The clock: now, else the point in time asked about (then, "last week" means the week before it).
    reference = (validate.timestamp_us(o.now, "now") if o.now is not None
                 else as_of if as_of is not None else now_us())
    cue = validate.content(o.cue, "cue") if o.cue is not None else None
    understood = (timewords.understand(cue, reference)
                  if cue is not None and window is None and vault.config.recall.time_words.enabled else None)
    seed = o.seed
    if seed is not None:
        seed = validate.memory_id(seed, "seed")
        if seed not in vault:
            raise NotFound(f"memory {seed} does not exist")
    names = strategy_names(cue, o.strategies, seed=seed, analogy=o.analogy)
    if o.associate and cue is not None:
        names.add("associative")  # one hop along co-activation links (recall/associative.py)
    if o.mmr_lambda is not None:
        lam = validate.unit_float(o.mmr_lambda, "mmr_lambda")
    else:
        # Similarity alone is pure vector search: no diversification or deduplication unless asked.
        lam = 1.0 if names == {"similarity"} else vault.config.recall.mmr_lambda
    alpha = validate.unit_float(o.alpha, "alpha") if o.alpha is not None and "analogical" in names else None
    checked = dataclasses.replace(o, cue=cue, top_k=top_k, weights=weights, entity_id=entity_id, seed=seed,
                                  mmr_lambda=lam, alpha=alpha, **origin)
    return Request(options=checked, names=names, window=window, reference=reference, understood=understood,
                   as_of=as_of)


def strategy_names(cue: str | None, strategies: Sequence[str] | None, *, seed: str | None = None,
                   analogy: Sequence[str] | None = None) -> set[str]:
    """The strategies a call runs: the ones named, or the default for what it gave (cue, seed, analogy)."""
    if strategies is None or len(strategies) == 0:
        if analogy is not None:
            return {"analogical"}
        if seed is not None:
            return {"causal"} if cue is None else {"fused", "causal"}
        return {"fused"} if cue is not None else {"temporal"}
    if isinstance(strategies, str):
        strategies = [strategies]
    names = set()
    for name in strategies:
        if name not in registry.STRATEGIES:
            raise InvalidInput(f"unknown strategy {name!r}; known: {', '.join(registry.STRATEGIES)}")
        names.add(name)
    if names & {"similarity", "lexical"} and cue is None:
        raise InvalidInput("similarity and lexical recall need a cue")
    if "causal" in names and cue is None and seed is None:
        raise InvalidInput("causal recall needs a seed memory id, or a cue to find one")
    if "analogical" in names and cue is None and seed is None and analogy is None:
        raise InvalidInput("analogical recall needs a cue, a seed memory or an analogy (a, b, c)")
    if analogy is not None and "analogical" not in names:
        raise InvalidInput("analogy is used by the analogical strategy only; add it to strategies")
    if seed is not None and not names & {"causal", "analogical"}:
        raise InvalidInput("seed is used by the causal and analogical strategies only; add one to strategies")
    return names


def run(vault: OpenVault, request: Request) -> RecallResults:
    """The ranked answer to a planned recall. Reads only: nothing in the vault changes."""
    r, o = request, request.options
    weights = cast(ScoringWeights, o.weights)  # plan checked it

    # As of a time, a memory superseded later was still true then: the scope lets superseded ones in,
    # and those replaced by then leave below (true_then), unless asked for.
    allowed = vault.scope(o.entity_id, r.window, o.include_superseded or r.as_of is not None,
                          Origin(author=o.author, agent=o.agent, session=o.session))
    settings = recall_settings(vault)
    fusion = settings.fusion
    # What confidence reads from the cue alone, read before the cue is embedded: whether the cue less
    # its unseen words will be embedded too, in the same run (CueEmbedder).
    reading = (confidence.read_cue(o.cue, vault.embedder.word_ranks(), vault.lexical_index.doc_freqs)
               if o.cue is not None else None)
    query = Query(
        # The sentence mean serves fusion (a paragraph asks several things); similarity alone stays
        # a plain vector search of the cue's own embedding.
        cue=o.cue, embed=CueEmbedder(vault.embedder, vault.config.recall.cue_by_sentence and r.names != {"similarity"},
                                     o.cue, None if reading is None else reading.rest_to_embed),
        allowed=allowed, settings=settings,
        limit=max(fusion.normalization_depth, o.top_k * fusion.candidate_factor),
        entity_id=o.entity_id, window=r.window, seed=o.seed, direction=o.direction, max_depth=o.max_depth,
        edge_types=o.edge_types, analogy=o.analogy, alpha=o.alpha,
        answers=pooled(o.top_k, o.include_superseded) if r.names == {"similarity"} else None)
    candidates, notes = run_strategies(vault, r.names, query)
    understood = r.understood
    if understood is not None:
        # A second pass of the same strategies inside the understood range: memories from then that
        # the whole-vault pass ranked too low to return still become candidates (docs/recall.md).
        inside = dataclasses.replace(
            query, embed=lambda _cue: query.cue_vector,  # embedded once, and only if a strategy asks
            allowed=allowed.within(understood.start, understood.end))
        if "cue_vector" in query.__dict__:
            inside.cue_vector = query.cue_vector  # nothing left to embed: no search waits beside it
        rc.merge(candidates, run_strategies(vault, r.names, inside)[0])
        notes.append(f"{understood.text()} (UTC): memories from then are preferred; "
                     f"pass time_range to choose the range yourself")

    preferred = None if understood is None else (understood.start, understood.end)
    vectors = query.vectors
    if r.as_of is not None and not o.include_superseded:
        true_then(vault, candidates, r.as_of, query.memories)
    results = rank(vault, candidates, weights, o.top_k, o.mmr_lambda, o.include_superseded, r.reference,
                   preferred, vectors, query.memories, r.as_of, cue=o.cue)
    if not results and r.names == {"associative"}:
        notes.append("associative recall follows associations learnt from use (memories used together: "
                     "`hebbs used ID ID`, or recall with reinforce); none of this cue's best matches has a strong "
                     "one yet, so nothing came back. Recall without --strategy finds what the cue matches")
    answer = RecallResults(results=results, notes=notes, time_understood=None if understood is None else TimeUnderstood(
        phrase=understood.phrase, start=understood.start, end=understood.end, text=understood.text()))
    if o.cue is not None:
        considered = sorted(candidates, key=lambda mid: candidates[mid].relevance,
                            reverse=True)[:background.CONSIDERED]
        judge_confidence(vault, answer, o.cue, query.cue_vector, vectors, considered=considered, cosines=query.cosines,
                         embed=query.embed, records=query.memories,
                         understood=understood, scope_empty=lambda: not query.cue_hits(vault), reading=reading)
    return answer


def run_strategies(vault: OpenVault, names: set[str], query: Query) -> tuple[rc.Candidates, list[str]]:
    """Each named strategy's candidates, merged in registry order."""
    candidates: rc.Candidates = {}
    notes: list[str] = []
    for name, strategy in registry.REGISTRY.items():
        if name in names:
            found, said = strategy(vault, query)
            if candidates:
                rc.merge(candidates, found)
            else:
                candidates = found  # a strategy's candidates are its own, built fresh for this call: no copy
            notes += said
    return candidates, notes


def recall_settings(vault: OpenVault) -> RecallConfig:
    """The vault's [recall] settings with each fusion weight it leaves unset its model's own
    (hebbs.models.calibration): MiniLM's weights were chosen on MiniLM's cosines."""
    recall = vault.config.recall
    fusion = recall.fusion.for_model(dict(calibration(vault.embedder.model_id).fusion))
    return recall if fusion is recall.fusion else msgspec.structs.replace(recall, fusion=fusion)


def calibrated_confidence(vault: OpenVault) -> tuple[tuple[Sequence[float], float] | None, float]:
    """The vault's model's confidence calibration (None: confidence.py's own, fitted on MiniLM) and the
    threshold that goes with it, unless the vault's config sets one."""
    own = calibration(vault.embedder.model_id)
    fitted = own.confidence_for(confidence.FEATURES)
    configured = vault.config.recall.abstain_threshold
    if configured is not None:
        return fitted, configured
    return fitted, own.abstain_threshold if fitted is not None else confidence.DEFAULT_THRESHOLD


def judge_confidence(vault: OpenVault, answer: RecallResults, cue: str, cue_vector: np.ndarray,
                     vectors: dict[str, np.ndarray] | None = None, considered: Sequence[str] = (),
                     cosines: dict[str, float] | None = None, embed: Callable[[str], np.ndarray] | None = None,
                     records: dict[str, Memory | None] | None = None,
                     understood: timewords.TimeRange | None = None,
                     scope_empty: Callable[[], bool] = lambda: False,
                     reading: confidence.CueReading | None = None) -> None:
    """Each result's confidence, and whether the answer abstains (recall/confidence.py), judged over
    the results and the `considered` candidates (ids) alike. `vectors`: stored vectors already read
    in this recall, by memory id; the others are read here. `cosines`: the cue's cosine to the
    memories its vector search found, by memory id. `understood`: the cue's time phrase.
    `scope_empty`: asked only when there is nothing to judge, to say why. `reading`: confidence.read_cue's
    reading of the cue, when the caller read it already."""
    lexical = vault.lexical_index
    shown = {r.memory.id: r.memory for r in answer.results}
    extra = [mid for mid in dict.fromkeys(considered) if mid not in shown]
    memories = list(shown.values()) + [m for m in cached_memories(vault, {} if records is None else records, extra)
                                       if m is not None]
    ids = [m.id for m in memories]
    known = {} if cosines is None else cosines
    # The cue's cosine to each candidate: the vector search gave it for its hits; only the others
    # (found by words alone) have their stored vectors read.
    unknown = [mid for mid in ids if mid not in known]
    if unknown:
        known = dict(known)
        known.update(zip(unknown, (cached_vectors(vault, {} if vectors is None else vectors, unknown)
                                   @ cue_vector).tolist()))
    in_time = (None if understood is None
               else [understood.start <= m.created_at <= understood.end for m in memories])
    mean = background.vault_mean(vault)
    fitted, threshold = calibrated_confidence(vault)
    judged = confidence.assess(cue, [known[mid] for mid in ids],
                               [lexical.terms_of(lexical_text(m)) for m in memories],
                               float(np.dot(cue_vector, mean)) if mean is not None else 0.0,
                               lexical.doc_freqs, max(1, lexical.count()),
                               word_ranks=vault.embedder.word_ranks(), in_time=in_time, reading=reading,
                               calibration=fitted)
    confidences = judged.confidences
    answer.threshold = threshold
    unseen = judged.unseen if embed is not None else []
    sure = [i for i, c in enumerate(confidences) if c >= answer.threshold] if unseen else []
    capped = set()
    if sure:
        # Whether each candidate that would answer does (confidence.answer_check); the cue less its
        # unseen words is embedded only when one of them asks how far those words bring the cue to it.
        rest: list[np.ndarray] = []
        stored = dict(zip([ids[i] for i in sure],
                          cached_vectors(vault, {} if vectors is None else vectors, [ids[i] for i in sure])))

        def toward(i: int) -> float:
            if not rest:
                rest.append(embed(judged.reading.rest))
            return float(stored[ids[i]] @ cue_vector - stored[ids[i]] @ rest[0])

        for i in sure:
            if not confidence.answer_check(judged, i, lexical_text(memories[i]), lambda i=i: toward(i)):
                confidences[i] = min(confidences[i], confidence.UNSEEN_CAP)
                capped.add(i)
    asked = judged.reading
    if asked.quantity or asked.when or asked.where or asked.form:
        # A cue that asks how many, how much, how old, when, where, for an address or a sum, and a
        # candidate that shares only what the cue names and holds no number (no time, place, address,
        # sum): it does not answer, whether or not the cue has words no memory holds ("How old is
        # Dana?" over "Dana works as a nurse": "old" is common, so not unseen).
        for i, c in enumerate(confidences):
            if c >= answer.threshold and i not in capped and not confidence.holds_the_kind_asked(
                    judged, i, lexical_text(memories[i])):
                confidences[i] = min(c, confidence.UNSEEN_CAP)
                capped.add(i)
    for i, result in enumerate(answer.results):
        result.confidence = confidences[i]
        result.details["confidence_features"] = judged.features(i)
        if i in capped:
            result.details["confidence_unseen"] = judged.unseen
    # The verdict is the results': a cue does not pass because a candidate top_k leaves out is confident
    # (issue 41: every result shown was below the threshold and the answer did not abstain).
    judged_shown = confidences[:len(answer.results)] if answer.results else confidences
    if capped and max(judged_shown, default=0.0) < answer.threshold:
        # Said only where it decides the answer: it abstains because of it.
        if judged.unseen:
            answer.notes.append(f"no memory holds {', '.join(repr(w) for w in judged.unseen)}: the matches of the "
                                f"rest of the cue do not answer it")
        else:
            kind = ("a number" if asked.quantity else "a time" if asked.when else "a place" if asked.where
                    else asked.form)
            answer.notes.append(f"the cue asks for {kind} and the matches that hold none share only what it "
                                f"names: they do not answer it")
    best = max(range(len(judged_shown)), key=judged_shown.__getitem__, default=None)
    answer.confidence = 0.0 if best is None else confidences[best]
    answer.abstained = confidence.abstains(judged_shown, answer.threshold)
    hidden = max(range(len(answer.results), len(confidences)), key=confidences.__getitem__, default=None)
    if answer.abstained and not answer.results:
        # The cue's own hits over the scope say whether there was anything to find at all.
        answer.notes.append(f"{confidence.NOTE} ("
                            + ("no memory in this scope" if scope_empty()
                               else "the strategies asked for brought no candidate") + ")")
    elif answer.abstained:
        # To four places where two would round up to the threshold: 0.2195 read "0.22 < 0.22".
        best_text = (f"{answer.confidence:.2f}" if round(answer.confidence, 2) < answer.threshold
                     else f"{answer.confidence:.4f}")
        answer.notes.append(f"{confidence.NOTE} (best confidence {best_text} < "
                            f"{answer.threshold:.2f}); the weak candidates follow")
        if hidden is not None and confidences[hidden] >= answer.threshold:
            answer.notes.append(f"a more confident match (candidate {ids[hidden]}, confidence "
                                f"{confidences[hidden]:.2f}) ranks below the results shown: raise top_k to see it")

def rank(vault: OpenVault, candidates: rc.Candidates, weights: ScoringWeights, top_k: int, lam: float,
         include_superseded: bool, stamp: int, preferred: tuple[int, int] | None,
         vectors: dict[str, np.ndarray] | None = None,
         records: dict[str, Memory | None] | None = None, as_of: int | None = None,
         cue: str | None = None) -> list[RecallResult]:
    """The top_k candidates by composite score, diversified by MMR when lam < 1 (1 is pure relevance:
    score order, nothing moved; 0 is diversity alone after the best). The stored vectors
    MMR reads are left in `vectors`, by memory id, for the confidence step; `records`: the memories
    already read in this recall, by id (those read here are added). Two memories that disagree (a
    value and its newer value, a confirmed conflict) are never each other's restatement: when one
    is shown the other comes too, the older value below the newer, each marked (`disagreeing`)."""
    records = {} if records is None else records
    config = vault.config
    diversify = lam < 1.0
    needed = mmr_pool(top_k) if diversify else pooled(top_k, include_superseded)
    # Candidates in order of relevance, each scored only while it can still make the first `needed`:
    # every factor but relevance is at most 1, so a candidate's score is at most its bound below,
    # and once the bound falls under the needed-th best score no later candidate can get in. With
    # relevance-only weights that is after about top_k candidates instead of all of them. The
    # bound adds up the same terms in the same order as scoring.composite, so it is never below it.
    items = list(candidates.items())
    relevances = [cand.relevance for _, cand in items]
    by_relevance = sorted(range(len(items)), key=relevances.__getitem__, reverse=True)
    best: list[float] = []  # min-heap of the `needed` best scores so far
    scored: list[tuple[float, int, scoring.Factors]] = []
    windows: dict[str | None, float] = {}  # recency window by context type: a handful of types per recall
    position = 0
    while position < len(by_relevance):
        # Scored a batch at a time (one catalog read, one pass of arithmetic): first enough to fill
        # `needed`, then every candidate whose bound still reaches the needed-th best score so far.
        if len(best) < needed:
            batch = by_relevance[position:position + needed - len(best)]
        else:
            end = position
            while end < len(by_relevance) and (weights.relevance * min(1.0, max(0.0, relevances[by_relevance[end]]))
                                               + weights.recency + weights.importance + weights.reinforcement
                                               ) >= best[0]:
                end += 1
            if end == position:
                break
            batch = by_relevance[position:end]
        position += len(batch)
        known, inputs = [], []
        for index, fields in zip(batch, vault.ranking_fields([items[i][0] for i in batch])):
            if fields is None:
                continue
            created_at, importance, access_count, context_type = fields
            window = windows.get(context_type)
            if window is None:
                window = windows[context_type] = scoring.recency_window_days(
                    context_type, config.recall.recency_window, config.decay, config.recall.untyped_recency_days)
            known.append(index)
            inputs.append((relevances[index], created_at, importance, access_count, window))
        for index, (score, factors) in zip(known, scoring.composite_many(inputs, stamp, weights, preferred)):
            scored.append((score, index, factors))
            if len(best) < needed:
                heapq.heappush(best, score)
            elif score > best[0]:
                heapq.heapreplace(best, score)
    # Best score first; equal scores in the candidates' own order, as a stable sort of them all gives.
    # Only the first `needed` can be returned (or enter MMR's pool): their factors become components.
    scored.sort(key=lambda item: (-item[0], item[1]))
    ranked = [(score, items[index][0], ScoreComponents(relevance=f[0], recency=f[1], importance=f[2], reinforcement=f[3]))
              for score, index, f in scored[:needed]]
    pool = ranked[:mmr_pool(top_k)] if diversify else ranked
    pool_ids = [mid for _, mid, _ in pool]
    # The pool's records say which of its memories disagree (record fields, no edge scan): read once,
    # and the results' reads below come from the same cache.
    partners = disagreeing(vault, cached_memories(vault, records, pool_ids), include_superseded, as_of)
    if diversify and len(ranked) > 1:
        # The pool MMR picks from: with lambda near 1 a candidate far below the top_k never gets
        # picked, and a pool of POOL_FACTOR * top_k alone made every recall's cost grow with top_k.
        # From RocksDB, four times cheaper than the HNSW graph (hnswlib's get_items), and only those
        # neighbour support has not read already; the confidence step reads none of them again.
        pool_vectors = cached_vectors(vault, {} if vectors is None else vectors, pool_ids)
        index = {mid: i for i, mid in enumerate(pool_ids)}
        apart = [(index[a], index[b]) for a, others in partners.items() if a in index for b in others if b in index]
        order = rc.mmr_order([score for score, _, _ in pool], pool_vectors, lam, top_k,
                             calibration(vault.embedder.model_id).duplicate_similarity
                             if config.recall.duplicate_similarity is None else config.recall.duplicate_similarity,
                             apart)
        ranked = [pool[i] for i in order]
    else:
        # Room for superseded memories that will be moved below their successors.
        ranked = ranked[:pooled(top_k, include_superseded)]
    ranked = with_partners(ranked, pool, partners, top_k)
    results = []
    memories = cached_memories(vault, records, [mid for _, mid, _ in ranked])
    for (score, mid, parts), memory in zip(ranked, memories):
        if memory is not None:
            cand = candidates[mid]
            results.append(RecallResult(memory=memory, score=score, components=parts,
                                        strategies=cand.strategies, details=cand.details))
    results = below_successors(results, include_superseded, cue)[:top_k]
    mark(vault, results, include_superseded, as_of)
    return results


def successor(memory: Memory, include_superseded: bool) -> str | None:
    """The newer memory that replaced this one or changed its value. A superseded memory is in a
    recall only when asked for or as of a time before its successor; one that also has a newer value
    names that one unless superseded memories are asked for."""
    if memory.superseded_by is not None and (include_superseded or memory.newer_value is None):
        return memory.superseded_by
    return memory.newer_value


def _holds(vault: OpenVault, memory_id: str, as_of: int | None) -> bool:
    """Whether a memory exists (none was forgotten since) and, as of a time, was already created then."""
    entry = vault.entry(memory_id)
    return entry is not None and (as_of is None or entry.created_at <= as_of)


def disagreeing(vault: OpenVault, memories: Sequence[Memory | None], include_superseded: bool,
                as_of: int | None) -> dict[str, set[str]]:
    """{memory id: the ids it disagrees with}, both ways, for these memories: a value and its newer
    value, a superseded memory and its successor (when asked for), a confirmed conflict. Only what
    still exists, and as of a time, what existed then."""
    out: dict[str, set[str]] = {}
    for m in memories:
        if m is None:
            continue
        newer = successor(m, include_superseded)
        for other in ([newer] if newer is not None else []) + list(m.conflicts_with):
            if _holds(vault, other, as_of):
                out.setdefault(m.id, set()).add(other)
                out.setdefault(other, set()).add(m.id)
    return out


def with_partners(ranked: list[tuple[float, str, ScoreComponents]], pool: list[tuple[float, str, ScoreComponents]],
                  partners: dict[str, set[str]], top_k: int) -> list[tuple[float, str, ScoreComponents]]:
    """The picks, each followed by the pool's memories that disagree with it and were not picked: the
    other value is what makes the answer honest, so it comes right after the pick and takes the place
    of the last pick that is not part of such a pair. At most top_k picks are kept."""
    out = list(ranked[:top_k])
    if not partners:
        return out
    by_id = {item[1]: item for item in pool}
    position = 0
    while position < len(out):
        mid = out[position][1]
        shown = {m for _, m, _ in out}
        for other in sorted(partners.get(mid, ())):
            if other in shown or other not in by_id:
                continue
            free = next((i for i in range(len(out) - 1, position, -1) if out[i][1] not in partners), None)
            if len(out) >= top_k:
                if free is None:
                    break
                del out[free]
            out.insert(position + 1, by_id[other])
            shown.add(other)
        position += 1
    return out


def true_then(vault: OpenVault, candidates: rc.Candidates, as_of: int, records: dict[str, Memory | None]) -> None:
    """Drops the candidates superseded by a memory created at or before `as_of`: replaced by then
    (the scope let every superseded memory in, since one replaced later was still true at as_of)."""
    replaced = [mid for mid in candidates if (entry := vault.entry(mid)) is not None and entry.superseded_by]
    for memory in cached_memories(vault, records, replaced):
        if memory is not None and memory.superseded_by is not None and _holds(vault, memory.superseded_by, as_of):
            del candidates[memory.id]


def mark(vault: OpenVault, results: list[RecallResult], include_superseded: bool, as_of: int | None) -> None:
    """Each result's `current`, `newer`, `conflicts_with` and `marks`, as of the recall's time."""
    for r in results:
        m = r.memory
        newer = successor(m, include_superseded)
        if newer is not None and _holds(vault, newer, as_of):
            r.current, r.newer = False, newer
            entry = vault.entry(newer)
            when = format_day(m.valid_until if m.valid_until is not None else entry.created_at if entry else 0)
            if newer == m.newer_value and m.value_change:
                r.marks.append(f"older value: {m.value_change} on {when} (newer: {newer})")
            else:
                r.marks.append(f"replaced on {when} (newer: {newer})")
        r.conflicts_with = [other for other in m.conflicts_with if _holds(vault, other, as_of)]
        for other in r.conflicts_with:
            r.marks.append(f"conflicts with {other} (confirmed contradiction: which is true is not known)")


def format_day(micros: int) -> str:
    return timefmt.utc_text(micros, "%Y-%m-%d")


_VALUE_TOKENS = re.compile(r"[\w.:/-]+")


def _names_its_value(memory: Memory, asked: set[str]) -> bool:
    """Whether the cue holds a value this older value stated (its side of value_change, "7 -> 8")."""
    if not asked or memory.newer_value is None or not memory.value_change:
        return False
    stated = memory.value_change.split(" -> ", 1)[0].lower()
    return any(token in asked for token in _VALUE_TOKENS.findall(stated))


def below_successors(results: list[RecallResult], include_superseded: bool,
                     cue: str | None = None) -> list[RecallResult]:
    """A superseded memory, or an older value, never ranks above the memory that replaced it: it
    comes right after it. Unless the cue names the older value itself ("late memory 7", "which crane
    lifts 70 tonnes"): then it asks about that one, and the score decides (the mark still says it is
    not current)."""
    asked = set(_VALUE_TOKENS.findall(cue.lower())) if cue else set()
    newer = {r.memory.id: None if _names_its_value(r.memory, asked) else successor(r.memory, include_superseded)
             for r in results}
    shown = set(newer)
    if not any(n in shown for n in newer.values()):
        return results
    ordered = [r for r in results if newer[r.memory.id] not in shown]
    placed = {r.memory.id for r in ordered}
    while len(ordered) < len(results):
        for r in results:
            if r.memory.id not in placed and newer[r.memory.id] in placed:
                at = next(i for i, o in enumerate(ordered) if o.memory.id == newer[r.memory.id])
                ordered.insert(at + 1, r)
                placed.add(r.memory.id)
                break
        else:
            ordered += [r for r in results if r.memory.id not in placed]  # a cycle: left in score order
    return ordered
