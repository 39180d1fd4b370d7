"""Evaluation of cited answers on a JSONL question set: pure scoring functions plus a runner.

Question format (one JSON object a line; other keys are ignored):
    {"id": "idx-001", "question": "...", "expect": ["ANCHOR", ...], "kind": "answerable", "split": "test",
     "answer_has": ["...", ...]}
kind: answerable | typo | out_of_corpus; split: calibration | test; answer_has (optional, answerable and
typo questions): strings any one of which a correct answer's text must contain (case-insensitive, runs of
white space count as one space).

Metrics (`summarize`):
- hit_at_1, hit_at_3, mrr_at_10: over answerable+typo questions, on the rank (by citation number n) of the
  first citation whose anchor is expected. An abstention counts as a miss (reciprocal rank 0).
- retrieval_hit_at_1, retrieval_hit_at_3, retrieval_mrr_at_10: the same on the rank of the first expected
  anchor among the retrieved chunks (evidence.chunks, whatever the status).
- false_abstain / false_abstain_rate: answerable+typo questions that abstained (count, share of answerable).
- false_answer / false_answer_rate: out_of_corpus questions that were answered (count, share of unanswerable).
- answer_contains: share of the answerable+typo questions that carry answer_has whose answer text contains one
  of those strings (an abstention counts as not containing it); None when no question carries answer_has.
  answer_contains_questions: how many questions it is computed over.
- quotes_verified: share of all returned citations with verified = true (None when there were none).
- separation: min/max/mean of the gate's primary signal for answerable vs unanswerable questions, and the gap
  between the groups (> 0: a threshold can separate them; < 0: the ranges overlap by that much).
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from .types import Answer

KINDS = ("answerable", "typo", "out_of_corpus")
ANSWERABLE_KINDS = frozenset({"answerable", "typo"})
SPLITS = ("calibration", "test")
# Gate signals to plot and separate on, most telling first (the gate's `signals` may hold others too).
PREFERRED_SIGNALS = ("score", "similarity", "top_similarity", "top_score")


class QuestionSetError(ValueError):
    """A malformed question file."""


@dataclass(frozen=True)
class Question:
    id: str
    question: str
    expect: tuple[str, ...]
    kind: str
    split: str | None = None
    answer_has: tuple[str, ...] = ()

    @property
    def answerable(self) -> bool:
        return self.kind in ANSWERABLE_KINDS

    def for_calibrate(self) -> dict[str, Any]:
        """The element rag.calibrate expects: {id, question, expect, kind}."""
        return {"id": self.id, "question": self.question, "expect": list(self.expect), "kind": self.kind}


def parse_question(obj: Mapping[str, Any], where: str = "") -> Question:
    prefix = f"{where}: " if where else ""
    for key in ("id", "question", "kind"):
        if not isinstance(obj.get(key), str) or not obj[key]:
            raise QuestionSetError(f"{prefix}missing or empty {key!r}")
    expect = obj.get("expect", [])
    if not isinstance(expect, list) or not all(isinstance(a, str) for a in expect):
        raise QuestionSetError(f"{prefix}'expect' must be a list of anchors")
    if obj["kind"] not in KINDS:
        raise QuestionSetError(f"{prefix}kind {obj['kind']!r} is not one of {', '.join(KINDS)}")
    split = obj.get("split")
    if split is not None and split not in SPLITS:
        raise QuestionSetError(f"{prefix}split {split!r} is not one of {', '.join(SPLITS)}")
    answer_has = obj.get("answer_has", [])
    if (
        not isinstance(answer_has, list)
        or not all(isinstance(x, str) and x.strip() for x in answer_has)
        or ("answer_has" in obj and not answer_has)
    ):
        raise QuestionSetError(f"{prefix}'answer_has' must be a non-empty list of non-empty strings")
    if answer_has and obj["kind"] not in ANSWERABLE_KINDS:
        raise QuestionSetError(f"{prefix}'answer_has' on a {obj['kind']} question")
    return Question(
        str(obj["id"]), str(obj["question"]), tuple(expect), str(obj["kind"]), split, tuple(answer_has)
    )


def load_questions(path: str | Path, split: str = "all") -> list[Question]:
    """Questions of a JSONL file, in file order, restricted to `split` (calibration|test|all)."""
    if split not in (*SPLITS, "all"):
        raise QuestionSetError(f"split {split!r} is not one of calibration, test, all")
    out: list[Question] = []
    ids: set[str] = set()
    with open(path, encoding="utf-8") as f:
        for lineno, line in enumerate(f, start=1):
            if not line.strip():
                continue
            where = f"{path}:{lineno}"
            try:
                obj = json.loads(line)
            except json.JSONDecodeError as exc:
                raise QuestionSetError(f"{where}: not JSON ({exc.msg})") from exc
            if not isinstance(obj, dict):
                raise QuestionSetError(f"{where}: not a JSON object")
            q = parse_question(obj, where)
            if q.id in ids:
                raise QuestionSetError(f"{where}: duplicate id {q.id!r}")
            ids.add(q.id)
            if split == "all" or q.split == split:
                out.append(q)
    return out


# ---------------------------------------------------------------------- ranks
def _norm(anchor: str | None) -> str | None:
    return anchor.casefold() if anchor else None


def first_rank(expected: Iterable[str], anchors: Sequence[str | None]) -> int | None:
    """1-based position of the first anchor in `anchors` that is one of `expected`; None if there is none."""
    wanted = {_norm(a) for a in expected if a}
    for i, anchor in enumerate(anchors, start=1):
        if anchor and _norm(anchor) in wanted:
            return i
    return None


def hit_at(ranks: Sequence[int | None], k: int) -> float | None:
    """Share of ranks that are <= k (None ranks are misses); None for no questions."""
    if not ranks:
        return None
    return sum(1 for r in ranks if r is not None and r <= k) / len(ranks)


def mrr_at(ranks: Sequence[int | None], k: int) -> float | None:
    """Mean reciprocal rank, counting ranks beyond k (and None) as 0; None for no questions."""
    if not ranks:
        return None
    return sum(1.0 / r for r in ranks if r is not None and r <= k) / len(ranks)


def rate(count: int, total: int) -> float | None:
    return count / total if total else None


def _fold(text: str) -> str:
    return " ".join(text.casefold().split())


def contains_any(text: str | None, strings: Iterable[str]) -> bool:
    """Whether text contains one of strings, case-insensitively, runs of white space counting as one space."""
    if not text:
        return False
    folded = _fold(text)
    return any(_fold(s) in folded for s in strings if s.strip())


# ---------------------------------------------------------------------- gate signals
def _number(v: Any) -> bool:
    return isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v)


def _threshold_name(name: str) -> bool:
    return (
        name.startswith(("min_", "max_"))
        or name.endswith(("_threshold", "_min", "_max"))
        or name == "threshold"
    )


def gate_signals(gate: Mapping[str, Any]) -> dict[str, float]:
    """The gate's numeric signals: gate.signals, else the numeric top-level keys that are not thresholds."""
    src = gate.get("signals")
    if not isinstance(src, Mapping):
        src = {k: v for k, v in gate.items() if not _threshold_name(k)}
    return {k: float(v) for k, v in src.items() if _number(v)}


def gate_thresholds(gate: Mapping[str, Any]) -> dict[str, float]:
    """The gate's numeric thresholds: gate.thresholds, else top-level min_*/max_*/*_threshold keys."""
    src = gate.get("thresholds")
    if not isinstance(src, Mapping):
        src = {k: v for k, v in gate.items() if _threshold_name(k)}
    return {k: float(v) for k, v in src.items() if _number(v)}


def threshold_for(signal: str, thresholds: Mapping[str, float]) -> float | None:
    for name in (signal, f"min_{signal}", f"max_{signal}", f"{signal}_threshold", f"{signal}_min"):
        if name in thresholds:
            return thresholds[name]
    return None


def primary_signal(
    gate: Mapping[str, Any], name: str | None = None
) -> tuple[str | None, float | None, float | None]:
    """(signal name, value, threshold) of the gate signal to report on.

    `name` if given; else the first of PREFERRED_SIGNALS present; else the first signal that has a threshold;
    else the first signal.
    """
    signals = gate_signals(gate)
    thresholds = gate_thresholds(gate)
    chosen = name
    if chosen is None:
        chosen = next((s for s in PREFERRED_SIGNALS if s in signals), None)
    if chosen is None:
        chosen = next((s for s in signals if threshold_for(s, thresholds) is not None), None)
    if chosen is None:
        chosen = next(iter(signals), None)
    if chosen is None:
        return None, None, None
    return chosen, signals.get(chosen), threshold_for(chosen, thresholds)


def lower_is_better(signal: str | None) -> bool:
    """Distances gate from above; every other signal (similarity, coverage, score) from below."""
    return bool(signal) and "distance" in signal


# ---------------------------------------------------------------------- one question
@dataclass
class QuestionResult:
    id: str
    kind: str
    question: str
    expect: list[str]
    split: str | None = None
    status: str | None = None  # answered | abstained | error
    reason: str | None = None
    ask_id: int | None = None
    citation_rank: int | None = None  # first expected anchor among citations (order of n), 1-based
    retrieval_rank: int | None = None  # first expected anchor among evidence.chunks, 1-based
    cited: list[str | None] = field(default_factory=list)
    retrieved: list[str | None] = field(default_factory=list)
    answer: str | None = None
    answer_has: list[str] = field(default_factory=list)
    answer_contains: bool | None = None  # None: the question has no answer_has
    citations: int = 0
    verified: int = 0
    signals: dict[str, float] = field(default_factory=dict)
    thresholds: dict[str, float] = field(default_factory=dict)
    signal: str | None = None
    top_signal: float | None = None
    threshold: float | None = None
    fingerprint: str | None = None
    error: str | None = None

    @property
    def answerable(self) -> bool:
        return self.kind in ANSWERABLE_KINDS

    @property
    def answered(self) -> bool:
        return self.status == "answered"

    @property
    def correct(self) -> bool:
        """Answered with an expected source cited (answerable), or abstained (out of corpus)."""
        if self.answerable:
            return self.answered and self.citation_rank is not None
        return self.status == "abstained"

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def score_answer(q: Question, answer: Answer, signal: str | None = None) -> QuestionResult:
    """Scores one rag.ask result against the question's expected anchors."""
    cited = [c.anchor for c in sorted(answer.citations, key=lambda c: c.n)]
    retrieved = [c.get("anchor") for c in answer.chunks]
    name, value, threshold = primary_signal(answer.gate, signal)
    text = answer.answer if answer.answered else None
    return QuestionResult(
        id=q.id,
        kind=q.kind,
        question=q.question,
        expect=list(q.expect),
        split=q.split,
        status=answer.status,
        reason=answer.reason,
        ask_id=answer.ask_id,
        citation_rank=first_rank(q.expect, cited) if answer.answered else None,
        retrieval_rank=first_rank(q.expect, retrieved),
        cited=cited,
        retrieved=retrieved,
        answer=text,
        answer_has=list(q.answer_has),
        answer_contains=contains_any(text, q.answer_has) if q.answer_has else None,
        citations=len(answer.citations),
        verified=sum(1 for c in answer.citations if c.verified),
        signals=gate_signals(answer.gate),
        thresholds=gate_thresholds(answer.gate),
        signal=name,
        top_signal=value,
        threshold=threshold,
        fingerprint=answer.fingerprint,
    )


def error_result(q: Question, error: str) -> QuestionResult:
    """A question whose ask raised: it counts as a miss and as an abstention."""
    return QuestionResult(
        id=q.id,
        kind=q.kind,
        question=q.question,
        expect=list(q.expect),
        split=q.split,
        status="error",
        error=error,
        answer_has=list(q.answer_has),
        answer_contains=False if q.answer_has else None,
    )


# ---------------------------------------------------------------------- totals
def _stats(values: Sequence[float]) -> dict[str, Any]:
    if not values:
        return {"n": 0, "min": None, "max": None, "mean": None}
    return {"n": len(values), "min": min(values), "max": max(values), "mean": sum(values) / len(values)}


def separation(results: Sequence[QuestionResult], signal: str | None = None) -> dict[str, Any]:
    """Distribution of the primary gate signal for answerable vs unanswerable questions.

    gap = (worst answerable) - (best unanswerable) in the signal's good direction: > 0 means every answerable
    question scores better than every unanswerable one; < 0 means the ranges overlap by |gap|.
    overlapping counts the questions that fall inside the other group's range.
    """
    name = signal or next((r.signal for r in results if r.signal), None)

    def value(r: QuestionResult) -> float | None:
        return r.signals.get(name) if name else None

    pos = [v for r in results if r.answerable and (v := value(r)) is not None]
    neg = [v for r in results if not r.answerable and (v := value(r)) is not None]
    out: dict[str, Any] = {
        "signal": name,
        "lower_is_better": lower_is_better(name),
        "answerable": _stats(pos),
        "unanswerable": _stats(neg),
        "gap": None,
        "separated": None,
        "overlapping": None,
    }
    if pos and neg:
        if lower_is_better(name):
            gap = min(neg) - max(pos)
            lo, hi = min(neg), max(pos)  # overlap region
        else:
            gap = min(pos) - max(neg)
            lo, hi = min(pos), max(neg)
        out["gap"] = gap
        out["separated"] = gap > 0
        out["overlapping"] = 0 if gap > 0 else sum(1 for v in pos + neg if lo <= v <= hi)
    thresholds = [r.threshold for r in results if r.threshold is not None and r.signal == name]
    out["threshold"] = thresholds[0] if thresholds else None
    return out


def summarize(results: Sequence[QuestionResult], signal: str | None = None) -> dict[str, Any]:
    """Totals of a run; see the module docstring for each metric."""
    pos = [r for r in results if r.answerable]
    neg = [r for r in results if not r.answerable]
    cite_ranks = [r.citation_rank if r.answered else None for r in pos]
    retr_ranks = [r.retrieval_rank for r in pos]
    false_abstain = sum(1 for r in pos if not r.answered)
    false_answer = sum(1 for r in neg if r.answered)
    with_has = [r for r in pos if r.answer_contains is not None]
    n_citations = sum(r.citations for r in results)
    n_verified = sum(r.verified for r in results)
    by_kind: dict[str, dict[str, int]] = {}
    for r in results:
        k = by_kind.setdefault(
            r.kind, {"questions": 0, "answered": 0, "abstained": 0, "errors": 0, "correct": 0}
        )
        k["questions"] += 1
        k["answered"] += r.status == "answered"
        k["abstained"] += r.status == "abstained"
        k["errors"] += r.status == "error"
        k["correct"] += r.correct
    return {
        "questions": len(results),
        "answerable": len(pos),
        "unanswerable": len(neg),
        "hit_at_1": hit_at(cite_ranks, 1),
        "hit_at_3": hit_at(cite_ranks, 3),
        "mrr_at_10": mrr_at(cite_ranks, 10),
        "retrieval_hit_at_1": hit_at(retr_ranks, 1),
        "retrieval_hit_at_3": hit_at(retr_ranks, 3),
        "retrieval_mrr_at_10": mrr_at(retr_ranks, 10),
        "false_abstain": false_abstain,
        "false_abstain_rate": rate(false_abstain, len(pos)),
        "false_answer": false_answer,
        "false_answer_rate": rate(false_answer, len(neg)),
        "answer_contains": rate(sum(1 for r in with_has if r.answer_contains), len(with_has)),
        "answer_contains_questions": len(with_has),
        "answered": sum(1 for r in results if r.answered),
        "abstained": sum(1 for r in results if r.status == "abstained"),
        "errors": sum(1 for r in results if r.status == "error"),
        "citations": n_citations,
        "quotes_verified": rate(n_verified, n_citations),
        "separation": separation(results, signal),
        "by_kind": by_kind,
    }


def misses(results: Sequence[QuestionResult]) -> list[QuestionResult]:
    """Answerable questions not answered with an expected source or whose answer lacks every answer_has
    string, and unanswerable ones that were answered."""
    return [r for r in results if not r.correct or r.answer_contains is False]


def calibration_overlap(question_ids: Iterable[str], gate: Mapping[str, Any]) -> list[str]:
    """Evaluated question ids the tenant's thresholds were calibrated on (gate.calibrated_on)."""
    calibrated = gate.get("calibrated_on") or []
    if not isinstance(calibrated, list):
        return []
    seen = {str(x) for x in calibrated}
    return [i for i in question_ids if i in seen]


def calibration_summary(tenant: str, gate: Mapping[str, Any]) -> str:
    """One line saying what rag.calibrate decided and stored (rag.tenant.gate)."""
    if "min_score" not in gate:
        return f"tenant {tenant} has no calibration: the gate uses pgcite.min_score (default 0.5)"
    gap = float(gate.get("gap", 0.0))
    shape = f"separable (gap {gap:.4f})" if gate.get("separable") else f"overlap {-gap:.4f}"
    rule = gate.get("rule")
    if rule == "smoothed_cost":
        bandwidth = (gate.get("bandwidth") or {}).get("used")
        how = (
            f"{shape}: lowest smoothed cost (bandwidth {bandwidth}), a wrong answer costing "
            f"{gate.get('false_answer_cost')} wrong abstentions"
        )
    elif rule == "midpoint_of_gap" or gate.get("separable"):
        # rule midpoint_of_gap (0.7.0), or a calibration stored before 0.7.0
        how = f"{shape}: midpoint"
    else:
        how = (
            f"{shape}: lowest cost, a wrong answer costing {gate.get('false_answer_cost')} wrong abstentions"
        )
    threshold = float(gate["min_score"])
    errors = f"{gate.get('false_answer')} wrong answers, {gate.get('false_abstain')} wrong abstentions"
    decided = f"tenant {tenant}: min_score = {threshold:.6g} from {gate.get('questions')} questions"
    return f"{decided}; {how}; at it {errors}"


# ---------------------------------------------------------------------- runner
def run(
    ask: Callable[[str], Answer],
    questions: Sequence[Question],
    *,
    signal: str | None = None,
    progress: Callable[[QuestionResult], None] | None = None,
    stop_on: tuple[type[BaseException], ...] = (),
) -> list[QuestionResult]:
    """Asks every question with `ask(question_text)` and scores it.

    An exception from `ask` is recorded on that question (status error) unless it is one of `stop_on`.
    """
    results: list[QuestionResult] = []
    for q in questions:
        try:
            result = score_answer(q, ask(q.question), signal)
        except stop_on:
            raise
        except Exception as exc:  # one failing question must not lose the whole run
            sqlstate = getattr(exc, "sqlstate", None)
            result = error_result(q, f"[{sqlstate}] {exc}" if sqlstate else str(exc))
        results.append(result)
        if progress is not None:
            progress(result)
    return results
