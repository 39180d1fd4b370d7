"""How the support threshold (setting min_support) was chosen: rag._support_scores over labelled pairs.

    DATABASE_URL=... .venv/bin/python bench/support_threshold.py [--pairs eval/support-pairs.jsonl] [--json]

eval/support-pairs.jsonl: 30 sentences of the PostgreSQL manual (routine vacuuming, index types), each with
  - verbatim: the quote itself as the answer's sentence (supported),
  - paraphrase: the quote restated as a model would (supported),
  - unsupported_same_topic: a claim on the same topic that the quote does not make (not supported),
  - wrong_quote: the paraphrase cited with another sentence's quote (not supported),
plus 3 sentences that combine two quotes (supported) and 3 off-topic claims (not supported).
Prints, per kind, the signals (lexical share, MiniLM similarity, the score) and, for every threshold, the
supported sentences it would reject and the unsupported ones it would accept; then the threshold chosen:
on the calibration half (topics 1-15), the highest threshold that rejects no supported sentence, less a
margin of 0.05 (a rejected true sentence costs a retry or an abstention; an accepted false one reaches the
caller), and what it does on the test half (topics 16-30, combined and off-topic sentences).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import connect  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]


def sweep(items: list[dict], key: str) -> list[dict]:
    rows = []
    for t100 in range(0, 101):
        t = t100 / 100
        rejected_true = [i for i in items if i["supported"] and not (i[key] >= t and not i["missing"])]
        accepted_false = [i for i in items if not i["supported"] and i[key] >= t and not i["missing"]]
        rows.append(
            {
                "threshold": t,
                "rejects_supported": len(rejected_true),
                "accepts_unsupported": len(accepted_false),
            }
        )
    return rows


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--pairs", default=str(ROOT / "eval" / "support-pairs.jsonl"))
    ap.add_argument("--margin", type=float, default=0.05, help="subtracted from the calibration boundary")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    pairs = [json.loads(line) for line in Path(args.pairs).read_text().splitlines() if line.strip()]
    with connect() as conn:
        full = conn.execute(
            "SELECT rag._support_scores(%s::jsonb, 0)",
            (json.dumps([{"sentence": p["sentence"], "quotes": p["quotes"]} for p in pairs]),),
        ).fetchone()[0]
    items = []
    for p, s in zip(pairs, full, strict=True):
        items.append(
            {
                **p,
                "lexical": s["lexical"],
                "similarity": s["similarity"],
                "score": s["score"],
                "missing": s["missing"],
            }
        )
    by_kind: dict[str, list[dict]] = defaultdict(list)
    for i in items:
        by_kind[i["kind"]].append(i)
    report: dict = {"pairs": len(items), "kinds": {}}
    for kind, xs in sorted(by_kind.items()):
        report["kinds"][kind] = {
            "n": len(xs),
            "supported": xs[0]["supported"],
            **{
                f"{sig}_{agg}": round(fn([x[sig] for x in xs]), 3)
                for sig in ("lexical", "similarity", "score")
                for agg, fn in (("min", min), ("mean", lambda v: sum(v) / len(v)), ("max", max))
            },
            "missing_name_or_number": sum(1 for x in xs if x["missing"]),
        }
    calibration = [i for i in items if i.get("split") == "calibration"]
    test = [i for i in items if i.get("split") != "calibration"]
    for key in ("score", "lexical"):
        rows = sweep(calibration, key)
        # the highest threshold, in steps of 0.05, that rejects no supported sentence of the calibration half,
        # less one step: a model's paraphrases may stray further from their quotes than these
        ok = [r for r in rows if r["rejects_supported"] == 0 and round(r["threshold"] * 100) % 5 == 0]
        boundary = max(ok, key=lambda r: r["threshold"])["threshold"]
        chosen = round(max(0.0, boundary - args.margin), 2)
        at = {r["threshold"]: r for r in sweep(test, key)}[chosen]
        report[key] = {
            "boundary": boundary,
            "chosen": chosen,
            "calibration": {r["threshold"]: r for r in rows}[chosen],
            "test": at,
            "sweep_all": [r for r in sweep(items, key) if round(r["threshold"] * 100) % 5 == 0],
            "accepted_unsupported": [
                {"id": i["id"], "split": i["split"], key: i[key]}
                for i in items
                if not i["supported"] and i[key] >= chosen and not i["missing"]
            ],
            "rejected_supported": [
                {"id": i["id"], "split": i["split"], key: i[key]}
                for i in items
                if i["supported"] and not (i[key] >= chosen and not i["missing"])
            ],
        }
    if args.json:
        print(json.dumps(report, indent=2))
        return 0
    print(f"{report['pairs']} labelled pairs")
    print(f"{'kind':24} {'n':>3}  lexical min/mean/max  similarity min/mean/max  score min/mean/max  missing")
    for kind, k in report["kinds"].items():
        print(
            f"{kind:24} {k['n']:>3}  {k['lexical_min']:.2f} {k['lexical_mean']:.2f} {k['lexical_max']:.2f}"
            f"        {k['similarity_min']:.2f} {k['similarity_mean']:.2f} {k['similarity_max']:.2f}"
            f"           {k['score_min']:.2f} {k['score_mean']:.2f} {k['score_max']:.2f}     "
            f"{k['missing_name_or_number']}"
        )
    for key in ("score", "lexical"):
        r = report[key]
        print(f"\nthreshold on {key} (all pairs): rejected supported / accepted unsupported")
        for row in r["sweep_all"]:
            if 0.3 <= row["threshold"] <= 0.9:
                t, rs, au = row["threshold"], row["rejects_supported"], row["accepts_unsupported"]
                print(f"  {t:.2f}: {rs:>3} / {au:>3}")
        cal, tst = r["calibration"], r["test"]
        counts = (
            f"calibration {cal['rejects_supported']} / {cal['accepts_unsupported']}, "
            f"test {tst['rejects_supported']} / {tst['accepts_unsupported']}"
        )
        print(f"  calibration boundary {r['boundary']:.2f}, chosen {r['chosen']:.2f}; {counts}")
        print(
            "  accepted unsupported: "
            + ", ".join(f"{a['id']} ({a[key]:.2f})" for a in r["accepted_unsupported"])
        )
        print(
            "  rejected supported: " + ", ".join(f"{a['id']} ({a[key]:.2f})" for a in r["rejected_supported"])
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
