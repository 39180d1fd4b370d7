"""Evaluation metrics and the HTML report on hand-made cases (no database)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pgcite.evaluate import (
    Question,
    QuestionSetError,
    calibration_overlap,
    calibration_summary,
    error_result,
    first_rank,
    gate_signals,
    gate_thresholds,
    hit_at,
    load_questions,
    misses,
    mrr_at,
    primary_signal,
    run,
    score_answer,
    separation,
    summarize,
)
from pgcite.report import render_html, strip_plot
from pgcite.types import Answer

ROOT = Path(__file__).resolve().parents[1]

# The shape rag.ask puts in evidence.gate.
GATE = {
    "failed": [],
    "passed": True,
    "signals": {"coverage": 1.0, "sentence": 0.75, "similarity": 0.5},
    "thresholds": {"source": "default", "min_coverage": 0.5, "min_sentence": 0.4, "min_similarity": 0.45},
    "corrected_question": "q",
}


def answer(status, cited=(), retrieved=(), similarity=0.5, verified=None, ask_id=1):
    verified = [True] * len(cited) if verified is None else verified
    citations = [
        {"n": n, "chunk_id": 100 + n, "doc_key": "d.html", "anchor": a, "quote": f"q{n}", "verified": v}
        for n, (a, v) in enumerate(zip(cited, verified, strict=True), start=1)
    ]
    gate = {**GATE, "signals": {**GATE["signals"], "similarity": similarity}}
    chunks = [{"rank": r, "chunk_id": 200 + r, "anchor": a} for r, a in enumerate(retrieved, start=1)]
    return Answer.from_row(
        {
            "ask_id": ask_id,
            "status": status,
            "answer": "text [1]" if status == "answered" else None,
            "reason": None if status == "answered" else "no_relevant_sources",
            "citations": citations,
            "evidence": {"gate": gate, "chunks": chunks, "fingerprint": f"fp{ask_id}"},
        }
    )


def q(id, kind="answerable", expect=("A",)):
    return Question(id, f"question {id}?", tuple(expect) if kind != "out_of_corpus" else (), kind, "test")


# ---------------------------------------------------------------------- ranks
def test_first_rank():
    assert first_rank(["B"], ["A", "B", "C"]) == 2
    assert first_rank(["C", "A"], ["A", "B", "C"]) == 1  # first position holding any expected anchor
    assert first_rank(["X"], ["A", "B"]) is None
    assert first_rank([], ["A"]) is None
    assert first_rank(["A"], [None, "a"]) == 2  # anchors compare case-insensitively, None never matches
    assert first_rank(["A"], []) is None


def test_hit_and_mrr():
    ranks = [1, 2, None, 4]
    assert hit_at(ranks, 1) == 0.25
    assert hit_at(ranks, 3) == 0.5
    assert hit_at(ranks, 4) == 0.75
    assert mrr_at(ranks, 10) == (1 + 0.5 + 0 + 0.25) / 4 == 0.4375
    assert mrr_at(ranks, 3) == 0.375  # rank 4 is beyond 3: counts 0
    assert mrr_at([11], 10) == 0.0
    assert hit_at([], 1) is None and mrr_at([], 10) is None


def test_score_answer_ranks_by_citation_number_and_retrieval_order():
    # citations come back sorted by n whatever their order in the JSON
    a = Answer.from_row(
        {
            "ask_id": 7,
            "status": "answered",
            "answer": "x [1] y [2]",
            "reason": None,
            "citations": [
                {"n": 2, "chunk_id": 2, "doc_key": "d", "anchor": "A", "verified": True},
                {"n": 1, "chunk_id": 1, "doc_key": "d", "anchor": "B", "verified": False},
            ],
            "evidence": {"gate": GATE, "chunks": [{"rank": 2, "anchor": "A"}, {"rank": 1, "anchor": "C"}]},
        }
    )
    r = score_answer(q("x"), a)
    assert r.cited == ["B", "A"]
    assert r.citation_rank == 2
    assert r.retrieved == ["C", "A"]
    assert r.retrieval_rank == 2
    assert (r.citations, r.verified) == (2, 1)
    assert (r.signal, r.top_signal, r.threshold) == ("similarity", 0.5, 0.45)


def test_abstention_has_no_citation_rank_but_keeps_retrieval_rank():
    r = score_answer(q("x"), answer("abstained", retrieved=["Z", "A"], similarity=0.2))
    assert r.citation_rank is None
    assert r.retrieval_rank == 2
    assert r.reason == "no_relevant_sources"
    assert r.fingerprint == "fp1"
    assert not r.correct


def results_fixture():
    return [
        # answerable: cited at 1, retrieved at 1
        score_answer(q("a1"), answer("answered", ["A", "B"], ["A", "B"], similarity=0.8)),
        # answerable: cited at 2 (first citation wrong), retrieved at 3
        score_answer(q("a2"), answer("answered", ["B", "A"], ["B", "C", "A"], similarity=0.6)),
        # typo: abstained (false abstention), retrieved at 2
        score_answer(q("t1", "typo"), answer("abstained", [], ["B", "A"], similarity=0.3)),
        # answerable: answered but cites nothing expected; expected anchor retrieved at 5
        score_answer(
            q("a3"), answer("answered", ["C"], ["C", "D", "E", "F", "A"], similarity=0.5, verified=[False])
        ),
        # out of corpus: correctly abstained
        score_answer(q("o1", "out_of_corpus"), answer("abstained", [], ["C"], similarity=0.2)),
        # out of corpus: answered (false answer)
        score_answer(q("o2", "out_of_corpus"), answer("answered", ["C"], ["C"], similarity=0.55)),
    ]


def test_summarize_exact():
    s = summarize(results_fixture())
    assert (s["questions"], s["answerable"], s["unanswerable"]) == (6, 4, 2)
    # citation ranks of answerable/typo: [1, 2, None (abstained), None (nothing expected cited)]
    assert s["hit_at_1"] == 1 / 4
    assert s["hit_at_3"] == 2 / 4
    assert s["mrr_at_10"] == (1 + 1 / 2) / 4
    # retrieval ranks: [1, 3, 2, 5]
    assert s["retrieval_hit_at_1"] == 1 / 4
    assert s["retrieval_hit_at_3"] == 3 / 4
    assert s["retrieval_mrr_at_10"] == (1 + 1 / 3 + 1 / 2 + 1 / 5) / 4
    assert (s["false_abstain"], s["false_abstain_rate"]) == (1, 1 / 4)
    assert (s["false_answer"], s["false_answer_rate"]) == (1, 1 / 2)
    # citations: 2 + 2 + 0 + 1 (unverified) + 0 + 1 = 6, of which 5 verified
    assert (s["citations"], s["quotes_verified"]) == (6, 5 / 6)
    assert (s["answered"], s["abstained"], s["errors"]) == (4, 2, 0)
    assert s["by_kind"]["answerable"] == {
        "questions": 3,
        "answered": 3,
        "abstained": 0,
        "errors": 0,
        "correct": 2,
    }
    assert s["by_kind"]["typo"]["correct"] == 0
    assert s["by_kind"]["out_of_corpus"] == {
        "questions": 2,
        "answered": 1,
        "abstained": 1,
        "errors": 0,
        "correct": 1,
    }
    json.dumps(s)  # serialisable as is


def test_separation_overlap():
    sep = summarize(results_fixture())["separation"]
    assert sep["signal"] == "similarity"
    assert sep["answerable"] == {"n": 4, "min": 0.3, "max": 0.8, "mean": (0.8 + 0.6 + 0.3 + 0.5) / 4}
    assert sep["unanswerable"] == {"n": 2, "min": 0.2, "max": 0.55, "mean": (0.2 + 0.55) / 2}
    assert sep["gap"] == 0.3 - 0.55
    assert sep["separated"] is False
    # overlap region [0.3, 0.55]: answerable 0.3 and 0.5, unanswerable 0.55
    assert sep["overlapping"] == 3
    assert sep["threshold"] == 0.45


def test_separation_gap_and_lower_is_better():
    rs = [
        score_answer(q("a"), answer("answered", ["A"], ["A"], similarity=0.7)),
        score_answer(q("b"), answer("answered", ["A"], ["A"], similarity=0.5)),
        score_answer(q("o", "out_of_corpus"), answer("abstained", similarity=0.25)),
    ]
    sep = separation(rs)
    assert (sep["gap"], sep["separated"], sep["overlapping"]) == (0.25, True, 0)
    # a distance-like signal separates the other way round
    for r, d in zip(rs, (0.25, 0.5, 0.75), strict=True):
        r.signals["distance"] = d
    sep = separation(rs, "distance")
    assert sep["lower_is_better"] is True
    assert (sep["gap"], sep["separated"]) == (0.25, True)
    assert separation(rs[:2])["gap"] is None  # one group only


def test_empty_groups_give_none_not_errors():
    s = summarize([score_answer(q("o", "out_of_corpus"), answer("abstained"))])
    assert s["hit_at_1"] is None and s["mrr_at_10"] is None and s["false_abstain_rate"] is None
    assert s["false_answer_rate"] == 0.0
    assert s["quotes_verified"] is None  # no citations at all


def test_errors_count_as_misses():
    rs = [error_result(q("a"), "[22023] boom"), score_answer(q("b"), answer("answered", ["A"], ["A"]))]
    s = summarize(rs)
    assert (s["hit_at_1"], s["false_abstain"], s["errors"]) == (0.5, 1, 1)
    assert [r.id for r in misses(rs)] == ["a"]


def test_run_records_exceptions_and_stops_on_requested_ones():
    qs = [q("a"), q("b")]

    def ask(text):
        if text.endswith("a?"):
            raise ValueError("bad")
        return answer("answered", ["A"], ["A"])

    seen = []
    rs = run(ask, qs, progress=seen.append)
    assert [r.status for r in rs] == ["error", "answered"] and len(seen) == 2
    with pytest.raises(ValueError):
        run(ask, qs, stop_on=(ValueError,))


# ---------------------------------------------------------------------- gate signals
def test_gate_signals_and_thresholds():
    assert gate_signals(GATE) == {"coverage": 1.0, "sentence": 0.75, "similarity": 0.5}
    assert gate_thresholds(GATE) == {"min_coverage": 0.5, "min_sentence": 0.4, "min_similarity": 0.45}
    assert primary_signal(GATE) == ("similarity", 0.5, 0.45)
    assert primary_signal(GATE, "coverage") == ("coverage", 1.0, 0.5)
    flat = {"top_cosine": 0.7, "min_top_cosine": 0.6, "passed": True}
    assert gate_signals(flat) == {"top_cosine": 0.7}
    assert primary_signal(flat) == ("top_cosine", 0.7, 0.6)
    assert primary_signal({}) == (None, None, None)


# ---------------------------------------------------------------------- question files
def test_load_questions_filters_split_and_ignores_extra_keys(tmp_path):
    p = tmp_path / "q.jsonl"
    rows = [
        {
            "id": "a",
            "question": "A?",
            "expect": ["X"],
            "kind": "answerable",
            "split": "calibration",
            "note": 1,
        },
        {"id": "b", "question": "B?", "expect": [], "kind": "out_of_corpus", "split": "test"},
    ]
    p.write_text("\n".join(json.dumps(r) for r in rows) + "\n\n")
    assert [x.id for x in load_questions(p)] == ["a", "b"]
    assert [x.id for x in load_questions(p, "test")] == ["b"]
    assert load_questions(p, "calibration")[0].for_calibrate() == {
        "id": "a",
        "question": "A?",
        "expect": ["X"],
        "kind": "answerable",
    }


@pytest.mark.parametrize(
    "line",
    [
        '{"id": "a", "question": "A?", "expect": [], "kind": "maybe"}',
        '{"id": "a", "question": "A?", "expect": "X", "kind": "answerable"}',
        '{"question": "A?", "expect": [], "kind": "answerable"}',
        '{"id": "a", "question": "A?", "expect": [], "kind": "answerable", "split": "train"}',
        "not json",
    ],
)
def test_load_questions_rejects_malformed_lines(tmp_path, line):
    p = tmp_path / "q.jsonl"
    p.write_text(line + "\n")
    with pytest.raises(QuestionSetError, match=":1:"):
        load_questions(p)


def test_shipped_question_sets_load():
    dev = load_questions(ROOT / "eval" / "pgdocs-dev.jsonl")
    assert len(dev) == 186
    # session 7's 57 questions are all calibration: the test split is the one earlier rounds scored
    assert len(load_questions(ROOT / "eval" / "pgdocs-dev.jsonl", "calibration")) == 122
    assert len(load_questions(ROOT / "eval" / "pgdocs-dev.jsonl", "test")) == 64
    tiny = load_questions(ROOT / "eval" / "tiny.jsonl", "test")
    assert [x.kind for x in tiny].count("out_of_corpus") == 2
    off = load_questions(ROOT / "eval" / "offtopic.jsonl")
    assert len(off) == 501 and {x.kind for x in off} == {"out_of_corpus"}
    assert len(load_questions(ROOT / "eval" / "offtopic.jsonl", "calibration")) == 346
    assert len(load_questions(ROOT / "eval" / "offtopic.jsonl", "test")) == 155


def test_calibration_summary():
    separable = {
        "min_score": 0.61,
        "separable": True,
        "gap": 0.04,
        "questions": 10,
        "false_answer": 0,
        "false_abstain": 0,
        "false_answer_cost": 2,
    }
    assert calibration_summary("t", separable) == (
        "tenant t: min_score = 0.61 from 10 questions; separable (gap 0.0400): midpoint; "
        "at it 0 wrong answers, 0 wrong abstentions"
    )
    overlap = {**separable, "separable": False, "gap": -0.108, "false_answer": 1, "min_score": 0.517795}
    assert calibration_summary("t", overlap) == (
        "tenant t: min_score = 0.517795 from 10 questions; overlap 0.1080: lowest cost, a wrong answer "
        "costing 2 wrong abstentions; at it 1 wrong answers, 0 wrong abstentions"
    )
    smoothed = {**overlap, "rule": "smoothed_cost", "bandwidth": {"used": 0.0329}}
    assert calibration_summary("t", smoothed) == (
        "tenant t: min_score = 0.517795 from 10 questions; overlap 0.1080: lowest smoothed cost (bandwidth "
        "0.0329), a wrong answer costing 2 wrong abstentions; at it 1 wrong answers, 0 wrong abstentions"
    )
    assert "no calibration" in calibration_summary("t", {})


def test_calibration_overlap():
    assert calibration_overlap(["a", "b", "c"], {"calibrated_on": ["c", "a", "z"]}) == ["a", "c"]
    assert calibration_overlap(["a"], {}) == []
    assert calibration_overlap(["a"], {"calibrated_on": "a"}) == []


# ---------------------------------------------------------------------- report
def test_report_is_self_contained_html_with_plot_and_misses():
    rs = results_fixture()
    rs[0].question = "<script>alert(1)</script>"
    rs[2].question = "Is <b>this</b> escaped?"
    html = render_html(summarize(rs), rs, meta={"tenant": "t"}, warnings=["calibrated on <these>"])
    assert html.startswith("<!DOCTYPE html>")
    assert "<svg" in html and "stroke-dasharray" in html  # the threshold line
    assert "threshold 0.450" in html
    assert "<script" not in html and "&lt;script&gt;alert(1)" in html  # escaped (in "all questions")
    assert "<b>this" not in html and "&lt;b&gt;this&lt;/b&gt;" in html
    assert "calibrated on &lt;these&gt;" in html
    assert "http://" not in html.replace("http://www.w3.org/2000/svg", "")  # nothing fetched
    assert "Misses (3)" in html  # t1 abstained, a3 cites nothing expected, o2 answered


def test_strip_plot_without_values():
    assert "No values" in strip_plot([], "similarity", None)
    svg = strip_plot(results_fixture(), "similarity", 0.45)
    assert svg.count("<circle") == 6


# ---------------------------------------------------------------------- answer_has / answer_contains
def test_contains_any_folds_case_and_white_space():
    from pgcite.evaluate import contains_any

    assert contains_any("Use  the\nDROP   INDEX command [1]", ["drop index"])
    assert contains_any("x", ["nope", "X"])
    assert not contains_any("x", ["y"])
    assert not contains_any(None, ["x"]) and not contains_any("", ["x"])
    assert not contains_any("x", [])


def test_answer_contains_over_answerable_questions_with_answer_has():
    def qa(id, has, kind="answerable"):
        return Question(id, f"{id}?", ("A",), kind, "test", tuple(has))

    def with_text(status, text):
        from dataclasses import replace

        return replace(answer(status, ["A"] if status == "answered" else [], ["A"]), answer=text)

    rs = [
        score_answer(qa("a1", ["GIN index"]), with_text("answered", "Use a gin   INDEX. [1]")),
        score_answer(qa("a2", ["USING GIN"]), with_text("answered", "GIN indexes are preferred. [1]")),
        score_answer(qa("t1", ["vacuum"], "typo"), with_text("abstained", None)),
        score_answer(q("a3"), with_text("answered", "anything [1]")),  # no answer_has: not counted
        score_answer(q("o1", "out_of_corpus"), with_text("answered", "vacuum [1]")),
    ]
    assert [r.answer_contains for r in rs] == [True, False, False, None, None]
    assert rs[0].answer == "Use a gin   INDEX. [1]" and rs[2].answer is None
    s = summarize(rs)
    assert (s["answer_contains"], s["answer_contains_questions"]) == (1 / 3, 3)
    # a2 cites the right section but lacks the fact: a miss, shown with its answer
    assert [r.id for r in misses(rs)] == ["a2", "t1", "o1"]
    html = render_html(s, rs)
    assert "answer contains the fact" in html and "33.3%" in html
    assert "GIN indexes are preferred. [1]" in html and "no answer_has string" in html
    assert summarize(results_fixture())["answer_contains"] is None


@pytest.mark.parametrize(
    "extra",
    [
        {"answer_has": "x"},
        {"answer_has": []},
        {"answer_has": [""]},
        {"answer_has": [1]},
    ],
)
def test_load_questions_rejects_malformed_answer_has(tmp_path, extra):
    p = tmp_path / "q.jsonl"
    row = {"id": "a", "question": "A?", "expect": ["X"], "kind": "answerable", **extra}
    p.write_text(json.dumps(row) + "\n")
    with pytest.raises(QuestionSetError, match="answer_has"):
        load_questions(p)


def test_answer_has_only_on_answerable_questions(tmp_path):
    p = tmp_path / "q.jsonl"
    row = {"id": "o", "question": "O?", "expect": [], "kind": "out_of_corpus", "answer_has": ["x"]}
    p.write_text(json.dumps(row) + "\n")
    with pytest.raises(QuestionSetError, match="answer_has"):
        load_questions(p)


def test_dev_set_answerable_questions_all_carry_answer_has():
    dev = load_questions(ROOT / "eval" / "pgdocs-dev.jsonl")
    assert all(x.answer_has for x in dev if x.answerable)
    assert not any(x.answer_has for x in dev if not x.answerable)
