#!/usr/bin/env python3
"""Where a search's wall time went, from the trials it stored.

    python bench/search_wall_time.py tune.db [more.db ...] [--timeline OUT.json.gz]
    python bench/search_wall_time.py run.json.gz ...

For each database (its first run) or timeline: the run's time from start to finish, the
time to its first trial, the median time between two trials of one problem (ask, render,
measure and record one point; re-timings left out) by problem, and the time spent
switching from one problem to the next (the first trial of a problem after another's
last: its reference and buffers made ready). `--timeline` writes what the table is made
of (run times, and each trial's problem, origin and time stored), so it can be kept
without the database and read back in place of one.
"""

from __future__ import annotations

import argparse
import datetime as dt
import gzip
import json
import sqlite3
import statistics
import sys
from pathlib import Path


def timeline(path: str) -> dict:
    if path.endswith(".json.gz"):
        with gzip.open(path, "rt") as f:
            return json.load(f)
    with sqlite3.connect(f"file:{path}?mode=ro", uri=True) as db:
        run_id, started, finished = db.execute(
            "SELECT id, started_at, finished_at FROM autotune_runs ORDER BY id LIMIT 1"
        ).fetchone()
        trials = db.execute(
            "SELECT p.key, t.origin, t.created_at FROM autotune_trials t"
            " JOIN autotune_problems p ON p.id = t.problem_id WHERE t.run_id = ? ORDER BY t.id",
            (run_id,),
        ).fetchall()
    return {"started": started, "finished": finished, "trials": [list(t) for t in trials]}


def describe(name: str, data: dict) -> list[str]:
    at = dt.datetime.fromisoformat
    trials = data["trials"]
    widths = {key: json.loads(key).get("filter_width") for key, _, _ in trials}
    gaps: dict[str, list[float]] = {}
    switches = []
    for (key_a, _, time_a), (key_b, origin_b, time_b) in zip(trials, trials[1:], strict=False):
        seconds = (at(time_b) - at(time_a)).total_seconds()
        if key_a != key_b:
            switches.append(seconds)
        elif origin_b != "retime":
            gaps.setdefault(key_b, []).append(seconds)
    run_s = (at(data["finished"]) - at(data["started"])).total_seconds()
    first_s = (at(trials[0][2]) - at(data["started"])).total_seconds()
    cells = ", ".join(f"F = {widths[key]}: {statistics.median(values):.3f}" for key, values in gaps.items())
    between = sum(sum(values) for values in gaps.values())
    return [
        f"| {name} | {len(trials)} | {run_s:.1f} | {first_s:.1f} | {between:.1f} | "
        f"{len(switches)}: {sum(switches):.1f} | {cells} |"
    ]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("sources", nargs="+", help="SQLite databases or timelines (.json.gz)")
    parser.add_argument("--timeline", help="write the first source's timeline here (.json.gz)")
    args = parser.parse_args()
    if args.timeline:
        with gzip.open(args.timeline, "wt") as f:
            json.dump(timeline(args.sources[0]), f)
    print(
        "| source | rows | run s | to first trial | between trials | problem switches: s | median s a trial |"
    )
    print("|---|---|---|---|---|---|---|")
    for source in args.sources:
        for line in describe(Path(source).name, timeline(source)):
            print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
