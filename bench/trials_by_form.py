#!/usr/bin/env python3
"""How a separable search spent its trials between forms: per problem, the rows of
autotune_trials (trials and re-timings), the best time of the one-kernel forms and of
two launches (`passes = 2`), from each SQLite database given.

    python3 bench/trials_by_form.py before.db after.db
"""

from __future__ import annotations

import json
import sqlite3
import sys


def main() -> int:
    for path in sys.argv[1:]:
        print(f"\n`{path}`\n")
        print("| F | rank | rows | one kernel, best ms | two launches, best ms (origin) | two-launch rows |")
        print("|---|---|---|---|---|---|")
        connection = sqlite3.connect(path)
        problems = {
            pid: json.loads(key) for pid, key in connection.execute("select id, key from autotune_problems")
        }
        rows = list(
            connection.execute("select problem_id, config, status, time_ms, origin from autotune_trials")
        )
        for pid, key in sorted(problems.items(), key=lambda item: (item[1]["filter_width"], item[1]["rank"])):
            mine = [row for row in rows if row[0] == pid]
            timed = [
                (time_ms, origin, json.loads(config).get("passes", 1))
                for _, config, status, time_ms, origin in mine
                if status == "ok"
            ]
            one = min(t for t, _, passes in timed if passes == 1)
            two = sorted((t, origin) for t, origin, passes in timed if passes == 2)
            best_two = f"{two[0][0]:.4f} ({two[0][1]})" if two else "-"
            kind = f"| {key['filter_width']} | {key['rank']} | {len(mine)}"
            print(f"{kind} | {one:.4f} | {best_two} | {len(two)} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
