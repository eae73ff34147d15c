#!/usr/bin/env python3
"""Which kernels a search's final re-time takes, read off a search database.

    python bench/retime_candidates.py h200.db [--winners other_search.json ...] [--top 3]

For each problem of the database's first run: how many kernels the re-time takes by the
rule in `autotune.tune.retime.retime_candidates` and by the top three alone, the seconds
one re-time measurement took in that run (median gap between its re-time rows), and so
the seconds the rule adds (extra kernels x rounds x that). With `--winners` (an `autotune
search --json` output of another search on the same device), whether each width's winner
there was measured in this search, at which rank of its first measurements, and whether
each rule re-times it: a kernel faster side by side that a slow first measurement kept out
of the re-time shows as measured but not taken.
"""

from __future__ import annotations

import argparse
import datetime as dt
import gzip
import json
import sqlite3
import statistics
from pathlib import Path

from autotune.outcomes import first_measurement
from autotune.store.models import Trial
from autotune.tune.retime import retime_candidates

ROUNDS = 3


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("database", help="a search database, or an extract (.json.gz) of one")
    parser.add_argument(
        "--extract", help="write the rows read to this .json.gz (readable in place of the database)"
    )
    parser.add_argument("--winners", action="append", default=[], help="autotune search --json output")
    parser.add_argument("--top", type=int, default=3)
    args = parser.parse_args()
    winners = [_winners(Path(path)) for path in args.winners]
    print(
        "| problem | first measurements | re-timed, top only | re-timed, rule | s a re-time measurement "
        "| s added | other searches' winners: rank (top only / rule) |"
    )
    print("|---|---|---|---|---|---|---|")
    total_added = 0.0
    problems = _problems(args.database)
    if args.extract:
        with gzip.open(args.extract, "wt") as f:
            json.dump(problems, f)
    for key, rows in problems:
        first = [
            Trial(config_key=k, config=c, time_ms=ms)
            for origin, c, k, status, ms, _ in rows
            if status == "ok" and first_measurement(origin) and ms is not None
        ]
        if not first:
            continue
        top_only = retime_candidates(first, args.top, within=0.0)
        rule = retime_candidates(first, args.top)
        stamps = [dt.datetime.fromisoformat(at) for origin, *_, at in rows if origin == "retime"]
        gaps = [(b - a).total_seconds() for a, b in zip(stamps, stamps[1:], strict=False)]
        per = statistics.median(gaps) if gaps else float("nan")
        added = (len(rule) - len(top_only)) * ROUNDS * per
        total_added += added if gaps else 0.0
        width = json.loads(key).get("filter_width")
        ranked = sorted(first, key=lambda t: t.time_ms)
        marks = []
        for found in winners:
            if width in found:
                marks.append(_mark(found[width], ranked, top_only, rule))
        label = f"F = {width}" if width else key
        print(
            f"| {label} | {len(first)} | {len(top_only)} | {len(rule)} | {per:.3f} | {added:.1f} "
            f"| {', '.join(marks) or '-'} |"
        )
    print(f"\nSeconds the rule adds over the top {args.top} alone, all problems: {total_added:.1f}")
    return 0


def _problems(path: str) -> list[tuple[str, list[list]]]:
    """Each problem's key and its trials of the database's first run (origin, config,
    config key, status, time, when stored), in the order stored."""
    if path.endswith(".json.gz"):
        with gzip.open(path, "rt") as f:
            return [(key, rows) for key, rows in json.load(f)]
    problems = []
    with sqlite3.connect(f"file:{path}?mode=ro", uri=True) as db:
        (run_id,) = db.execute("SELECT id FROM autotune_runs ORDER BY id LIMIT 1").fetchone()
        for problem_id, key in db.execute("SELECT id, key FROM autotune_problems ORDER BY id").fetchall():
            rows = db.execute(
                "SELECT origin, config, config_key, status, time_ms, created_at FROM autotune_trials"
                " WHERE problem_id = ? AND run_id = ? ORDER BY id",
                (problem_id, run_id),
            ).fetchall()
            problems.append((key, [list(row) for row in rows]))
    return problems


def _winners(path: Path) -> dict[int, dict]:
    data = json.loads(path.read_text())
    results = data.get("data", data)["results"]
    return {r["filter_width"]: r["config"] for r in results if r.get("config")}


def _mark(wanted: dict, ranked: list[Trial], top_only: list[Trial], rule: list[Trial]) -> str:
    """Rank of the first measurement of `wanted` (a search of an older release may name
    fewer knobs: a config holding all of its values is it), and whether each rule takes it."""
    rank = next(
        (i for i, t in enumerate(ranked) if all(json.loads(t.config).get(k) == v for k, v in wanted.items())),
        None,
    )
    if rank is None:
        return "not measured"
    taken = [
        "yes" if ranked[rank].config_key in {t.config_key for t in chosen} else "no"
        for chosen in (top_only, rule)
    ]
    return f"{rank + 1} ({taken[0]} / {taken[1]})"


if __name__ == "__main__":
    raise SystemExit(main())
