#!/usr/bin/env python3
"""Check pgcite evaluation question files against the PostgreSQL 15 HTML corpus.

Usage:
  python3 eval/check_questions.py                      # eval/pgdocs-dev.jsonl, full corpus
  python3 eval/check_questions.py --files routine-vacuuming.html indexes-types.html \
          --splits test eval/tiny.jsonl
  python3 eval/check_questions.py --kinds out_of_corpus eval/offtopic.jsonl

What it does:
  * Full-corpus mode (no --files): globs the corpus in --html-dir and fails unless
    the result equals eval/pgdocs-corpus.txt (sorted, no backup-manifest-*.html).
  * Parses each corpus file with lxml and collects section ids: the id of every
    div whose class is sect1..sect5 (or chapter, reported as level 0), or, when
    such a div has no id, the id of the first <a>/<h1..h6> carrying one inside
    the div's own div.titlepage.  Fails on duplicate ids.
  * Validates every question line (keys, id format and uniqueness, kind, split,
    expect) and fails if an expected anchor is missing from the corpus, if a
    required split is missing, or if a kind is absent from a required split.
  * answer_has (optional: strings any one of which a correct answer must contain):
    a list of non-empty strings, only on answerable/typo questions, each found
    (case-insensitive, white space collapsed) in the own text of one of the
    question's expected sections; once a file uses it, every answerable and typo
    question of that file must have it.
Exit status 0 = all checks passed, 1 = at least one failure.
"""

import argparse
import collections
import glob
import json
import os
import re
import sys

from lxml import html as lxml_html

DEFAULT_HTML_DIR = "/usr/share/doc/postgresql-doc-15/html"
HERE = os.path.dirname(os.path.abspath(__file__))
DEFAULT_CORPUS_LIST = os.path.join(HERE, "pgdocs-corpus.txt")
DEFAULT_QUESTIONS = os.path.join(HERE, "pgdocs-dev.jsonl")

CORPUS_GLOBS = [
    "indexes*.html",
    "textsearch*.html",
    "maintenance.html",
    "routine-*.html",
    "logfile-maintenance.html",
    "backup*.html",
    "continuous-archiving.html",
]
EXCLUDE_RE = re.compile(r"^backup-manifest-.*\.html$")

KINDS = ("answerable", "typo", "out_of_corpus")
SPLITS = ("calibration", "test")
REQUIRED_KEYS = {"id", "question", "expect", "kind", "split"}
OPTIONAL_KEYS = {"answer_has"}
ID_RE = re.compile(r"^[a-z]+-\d{3}$")
SECT_CLASS_RE = re.compile(r"^sect([1-5])$")
HEADING_TAGS = {"a", "h1", "h2", "h3", "h4", "h5", "h6"}

# Question-id prefix -> chapter; the first expected anchor must be in it.
PREFIX_CHAPTER = {"idx": "indexes", "fts": "textsearch", "mnt": "maintenance", "bak": "backup"}


def chapter_of(filename):
    if filename.startswith("indexes"):
        return "indexes"
    if filename.startswith("textsearch"):
        return "textsearch"
    if filename in ("maintenance.html", "logfile-maintenance.html") or filename.startswith("routine-"):
        return "maintenance"
    if filename.startswith("backup") or filename == "continuous-archiving.html":
        return "backup"
    return "other"


def glob_corpus(html_dir):
    names = set()
    for pattern in CORPUS_GLOBS:
        for path in glob.glob(os.path.join(html_dir, pattern)):
            name = os.path.basename(path)
            if not EXCLUDE_RE.match(name):
                names.add(name)
    return sorted(names)


def local(tag):
    return tag.rsplit("}", 1)[-1] if isinstance(tag, str) else ""


def classes(el):
    return (el.get("class") or "").split()


def section_level(el):
    if local(el.tag) != "div":
        return None
    for c in classes(el):
        m = SECT_CLASS_RE.match(c)
        if m:
            return int(m.group(1))
        if c == "chapter":
            return 0
    return None


def titlepage_id(div):
    """id of the first a/h* with an id inside the div's own div.titlepage."""
    for child in div:
        if local(child.tag) == "div" and "titlepage" in classes(child):
            for el in child.iter():
                if local(el.tag) in HEADING_TAGS and el.get("id"):
                    return el.get("id")
    return None


def heading_text(div):
    for child in div:
        if local(child.tag) == "div" and "titlepage" in classes(child):
            for el in child.iter():
                if local(el.tag) in ("h1", "h2", "h3", "h4", "h5", "h6"):
                    return " ".join(el.text_content().split())
    return ""


def own_text(div):
    """The text of a section without its nested sections, white space collapsed, lower case."""
    copy = lxml_html.fromstring(lxml_html.tostring(div))
    for sub in list(copy.iter()):
        if sub is not copy and section_level(sub) is not None and sub.getparent() is not None:
            sub.drop_tree()
    return " ".join(copy.text_content().split()).lower()


def collect_sections(html_dir, files):
    """Return (sections, errors, stats).  sections: id -> info dict."""
    sections = {}
    errors = []
    stats = collections.Counter()
    for name in files:
        path = os.path.join(html_dir, name)
        if not os.path.isfile(path):
            errors.append(f"corpus file not found: {path}")
            continue
        root = lxml_html.parse(path).getroot()
        for div in root.iter():
            level = section_level(div)
            if level is None:
                continue
            ids = []
            if div.get("id"):
                ids.append(div.get("id"))
                stats["id on div"] += 1
            tp = titlepage_id(div)
            if tp and tp not in ids:
                ids.append(tp)
                stats["id in titlepage"] += 1
            if not ids:
                stats["section without id"] += 1
                errors.append(f"{name}: level-{level} section '{heading_text(div)}' has no id")
                continue
            parent = None
            anc = div.getparent()
            while anc is not None:
                if section_level(anc) is not None:
                    parent = anc.get("id") or titlepage_id(anc)
                    break
                anc = anc.getparent()
            for sid in ids:
                if sid in sections:
                    errors.append(f"duplicate section id {sid}: {sections[sid]['file']} and {name}")
                    continue
                sections[sid] = {
                    "file": name,
                    "level": level,
                    "parent": parent,
                    "title": heading_text(div),
                    "chapter": chapter_of(name),
                    "text": own_text(div),
                }
            stats[f"level {level}"] += 1
    return sections, errors, stats


def ancestors(sections, sid):
    out = []
    seen = set()
    cur = sections.get(sid, {}).get("parent")
    while cur and cur not in seen:
        seen.add(cur)
        out.append(cur)
        cur = sections.get(cur, {}).get("parent")
    return out


def check_questions(path, sections, required_splits, errors, warnings, notes, required_kinds=KINDS):
    counts = collections.Counter()
    ids = set()
    texts = set()
    has_answer_has = {True: [], False: []}  # answerable -> [(where, has answer_has)]
    # titles of sect1..sect5 (chapter names like "Full Text Search" are normal user words)
    titles = {
        s["title"].split(". ", 1)[-1].lower() for s in sections.values() if s["title"] and s["level"] > 0
    }
    try:
        lines = open(path, encoding="utf-8").read().splitlines()
    except OSError as e:
        errors.append(f"{path}: cannot read: {e}")
        return counts
    for lineno, line in enumerate(lines, 1):
        where = f"{os.path.basename(path)}:{lineno}"
        if not line.strip():
            errors.append(f"{where}: blank line")
            continue
        try:
            q = json.loads(line)
        except json.JSONDecodeError as e:
            errors.append(f"{where}: invalid JSON: {e}")
            continue
        if not isinstance(q, dict):
            errors.append(f"{where}: not a JSON object")
            continue
        keys = set(q)
        if not REQUIRED_KEYS <= keys <= REQUIRED_KEYS | OPTIONAL_KEYS:
            want = f"{sorted(REQUIRED_KEYS)} and optionally {sorted(OPTIONAL_KEYS)}"
            errors.append(f"{where}: keys {sorted(keys)}: want {want}")
            continue
        qid, text, expect, kind, split = q["id"], q["question"], q["expect"], q["kind"], q["split"]
        where = f"{where} ({qid})"
        if not isinstance(qid, str) or not ID_RE.match(qid):
            errors.append(f"{where}: bad id format (want e.g. idx-001)")
        elif qid in ids:
            errors.append(f"{where}: duplicate id")
        ids.add(qid)
        if not isinstance(text, str) or not text.strip():
            errors.append(f"{where}: empty question")
        else:
            norm = " ".join(text.lower().split())
            if norm in texts:
                errors.append(f"{where}: duplicate question text")
            texts.add(norm)
            for t in titles:
                if len(t.split()) >= 3 and t in norm:
                    warnings.append(f"{where}: question contains section title '{t}' verbatim")
        if kind not in KINDS:
            errors.append(f"{where}: kind {kind!r} not in {KINDS}")
        if split not in SPLITS:
            errors.append(f"{where}: split {split!r} not in {SPLITS}")
        if not isinstance(expect, list) or not all(isinstance(a, str) for a in expect):
            errors.append(f"{where}: expect must be a list of strings")
            continue
        if len(set(expect)) != len(expect):
            errors.append(f"{where}: duplicate anchors in expect")
        if kind == "out_of_corpus" and expect:
            errors.append(f"{where}: out_of_corpus question must have expect []")
        if kind in ("answerable", "typo") and not expect:
            errors.append(f"{where}: {kind} question needs at least one expected anchor")
        for a in expect:
            if a not in sections:
                errors.append(f"{where}: expected anchor {a} not found in corpus")
            elif sections[a]["level"] == 0:
                warnings.append(f"{where}: anchor {a} is a chapter-level id")
        for a in expect:
            anc = set(ancestors(sections, a))
            for b in expect:
                if b != a and b in anc:
                    notes.append(
                        f"{where}: {b} is an ancestor of {a} "
                        f"(fine only if {b}'s own text, outside {a}, also contains the answer)"
                    )
        check_answer_has(q, where, sections, errors)
        has_answer_has[kind in ("answerable", "typo")].append((where, "answer_has" in q))
        prefix = qid.split("-", 1)[0] if isinstance(qid, str) else ""
        if prefix == "ooc" and kind != "out_of_corpus":
            errors.append(f"{where}: ooc- id but kind {kind}")
        if prefix in PREFIX_CHAPTER and kind == "out_of_corpus":
            errors.append(f"{where}: {prefix}- id used for an out_of_corpus question")
        if prefix in PREFIX_CHAPTER and expect and expect[0] in sections:
            if sections[expect[0]]["chapter"] != PREFIX_CHAPTER[prefix]:
                errors.append(f"{where}: first anchor {expect[0]} is not in chapter {PREFIX_CHAPTER[prefix]}")
        counts[(kind, split)] += 1
    if not lines:
        errors.append(f"{path}: no questions")
    if any(has for _, has in has_answer_has[True]):
        for where, has in has_answer_has[True]:
            if not has:
                errors.append(f"{where}: answerable question without answer_has (the file uses it)")
    present_splits = {s for (_, s) in counts}
    for s in required_splits:
        if s not in present_splits:
            errors.append(f"{path}: split {s!r} is missing")
        for k in required_kinds:
            if counts[(k, s)] == 0:
                errors.append(f"{path}: no {k} question in split {s!r}")
    extra = present_splits - set(required_splits)
    if extra:
        errors.append(f"{path}: unexpected splits {sorted(extra)} (required: {required_splits})")
    return counts


def check_answer_has(q, where, sections, errors):
    if "answer_has" not in q:
        return
    strings = q["answer_has"]
    if (
        not isinstance(strings, list)
        or not strings
        or not all(isinstance(x, str) and x.strip() for x in strings)
    ):
        errors.append(f"{where}: answer_has must be a non-empty list of non-empty strings")
        return
    if q.get("kind") not in ("answerable", "typo"):
        errors.append(f"{where}: answer_has on a {q.get('kind')} question")
        return
    if len({" ".join(x.lower().split()) for x in strings}) != len(strings):
        errors.append(f"{where}: duplicate strings in answer_has")
    own = [sections[a]["text"] for a in q.get("expect") or [] if a in sections]
    for x in strings:
        needle = " ".join(x.lower().split())
        if own and not any(needle in t for t in own):
            errors.append(f"{where}: answer_has {x!r} is in none of the expected sections' own text")


def print_counts(path, counts, splits):
    print(f"\n{os.path.basename(path)}: {sum(counts.values())} questions")
    header = f"  {'kind':<15}" + "".join(f"{s:>13}" for s in splits) + f"{'total':>8}"
    print(header)
    for k in KINDS:
        row = [counts[(k, s)] for s in splits]
        print(f"  {k:<15}" + "".join(f"{n:>13}" for n in row) + f"{sum(row):>8}")
    tot = [sum(counts[(k, s)] for k in KINDS) for s in splits]
    print(f"  {'total':<15}" + "".join(f"{n:>13}" for n in tot) + f"{sum(tot):>8}")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("questions", nargs="*", help="JSONL files (default: eval/pgdocs-dev.jsonl)")
    ap.add_argument("--html-dir", default=DEFAULT_HTML_DIR)
    ap.add_argument(
        "--corpus-list",
        default=DEFAULT_CORPUS_LIST,
        help="file list to compare with the glob (full-corpus mode)",
    )
    ap.add_argument(
        "--files",
        nargs="+",
        metavar="FILE",
        help="restrict the corpus to these file names (no corpus-list comparison)",
    )
    ap.add_argument(
        "--splits",
        default="calibration,test",
        help="comma-separated splits that must be present (default: calibration,test)",
    )
    ap.add_argument(
        "--kinds",
        default=",".join(KINDS),
        help="comma-separated kinds each required split must contain (default: all three)",
    )
    ap.add_argument("--list-sections", action="store_true", help="print every collected section id")
    args = ap.parse_args(argv)

    errors, warnings, notes = [], [], []
    if args.files:
        files = sorted(set(args.files))
        corpus = set(glob_corpus(args.html_dir))
        for f in files:
            if f not in corpus:
                errors.append(f"--files: {f} is not part of the corpus")
    else:
        files = glob_corpus(args.html_dir)
        try:
            listed = [ln.strip() for ln in open(args.corpus_list, encoding="utf-8") if ln.strip()]
        except OSError as e:
            listed = None
            errors.append(f"cannot read corpus list {args.corpus_list}: {e}")
        if listed is not None:
            if listed != sorted(listed):
                errors.append(f"{args.corpus_list} is not sorted")
            if any(EXCLUDE_RE.match(n) for n in listed):
                errors.append(f"{args.corpus_list} contains backup-manifest files")
            if sorted(listed) != files:
                missing = sorted(set(files) - set(listed))
                extra = sorted(set(listed) - set(files))
                errors.append(f"corpus list differs from glob: missing {missing}, extra {extra}")
    print(f"corpus: {len(files)} files in {args.html_dir}")

    sections, sec_errors, stats = collect_sections(args.html_dir, files)
    errors.extend(sec_errors)
    print(f"sections: {len(sections)} ids (" + ", ".join(f"{k}: {v}" for k, v in sorted(stats.items())) + ")")
    if args.list_sections:
        for sid, s in sorted(sections.items(), key=lambda kv: (kv[1]["file"], kv[0])):
            print(f"  {sid:<40} L{s['level']} {s['file']}  {s['title']}")

    splits = [s.strip() for s in args.splits.split(",") if s.strip()]
    for s in splits:
        if s not in SPLITS:
            errors.append(f"--splits: unknown split {s!r}")
    kinds = [k.strip() for k in args.kinds.split(",") if k.strip()]
    for k in kinds:
        if k not in KINDS:
            errors.append(f"--kinds: unknown kind {k!r}")
    qfiles = args.questions or [DEFAULT_QUESTIONS]
    for qf in qfiles:
        counts = check_questions(qf, sections, splits, errors, warnings, notes, kinds)
        print_counts(qf, counts, SPLITS)

    for n in notes:
        print(f"NOTE: {n}")
    for w in warnings:
        print(f"WARNING: {w}")
    for e in errors:
        print(f"ERROR: {e}")
    if errors:
        print(f"\nFAILED: {len(errors)} error(s), {len(warnings)} warning(s)")
        return 1
    print(f"\nOK: all checks passed ({len(warnings)} warning(s))")
    return 0


if __name__ == "__main__":
    sys.exit(main())
