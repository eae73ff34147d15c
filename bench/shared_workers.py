#!/usr/bin/env python3
"""Throughput of N workers sharing one search (`search --shared`) on PostgreSQL.

    python bench/shared_workers.py --server postgresql+psycopg://autotune:autotune@localhost/autotune
                                   [--landscape ../shared/landscapes/convolution_A4000.json.gz]
                                   [--workers 1,2,4,8] [--trials 200] [--cost 0.2]

For each N, a new database on the server; N processes each run a shared `Tuner` on the
replayed landscape, every measurement costing `--cost` seconds of sleep (the device's
time, simulated), until the workers together have measured `--trials` points. Reported
per N: wall seconds, trials per second, the ideal (N / cost), and the overhead per
trial: the wall time each worker spent on anything but measuring (asking the shared
study, claiming, telling, our tables), per trial it measured. Duplicate measurements
are counted too (there should be none). Each database is dropped afterwards.
"""

from __future__ import annotations

import argparse
import glob
import os
import subprocess
import sys
import time
import uuid
from pathlib import Path

import sqlalchemy as sa

WORKER = """
import sys, time
from autotune.devices import device_info
from autotune.families.landscape import LandscapeEvaluator, LandscapeFamily, LandscapeProblem
from autotune.replay import load
from autotune.store import Store
from autotune.tune import Budget, Tuner

url, landscape, trials, cost = sys.argv[1], sys.argv[2], int(sys.argv[3]), float(sys.argv[4])


class Slow(LandscapeEvaluator):
    def measure(self, variant, problem, compiled=None):
        time.sleep(cost)
        return super().measure(variant, problem, compiled)


family = LandscapeFamily(load(landscape))
evaluator = Slow(family, device_info(0))
tuner = Tuner(Store(url), 0, evaluator.device, family, [LandscapeProblem(family.landscape.name)],
              sampler="tpe", budget=Budget(trials=trials), evaluator=evaluator, shared=True,
              retime_top=1, retime_rounds=1, retime_most=1)
start = time.monotonic()
(result,) = tuner.run()
print(time.monotonic() - start, evaluator.measured)
"""


def one(server: str, landscape: str, workers: int, trials: int, cost: float) -> dict[str, float]:
    name = f"autotune_bench_{uuid.uuid4().hex[:10]}"
    admin = sa.create_engine(server, isolation_level="AUTOCOMMIT")
    with admin.connect() as connection:
        connection.exec_driver_sql(f"CREATE DATABASE {name}")
    url = sa.make_url(server).set(database=name).render_as_string(hide_password=False)
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parent.parent)}
    try:
        start = time.monotonic()
        argv = [sys.executable, "-c", WORKER, url, landscape, str(trials), str(cost)]
        running = [subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, text=True) for _ in range(workers)]
        outputs = [process.communicate()[0].split() for process in running]
        wall = time.monotonic() - start
        engine = sa.create_engine(url)
        with engine.connect() as connection:
            counts = connection.execute(
                sa.text(
                    "SELECT COUNT(*), COUNT(DISTINCT config_key) FROM autotune_trials "
                    "WHERE origin NOT IN ('cached', 'retime') AND status != 'invalid'"
                )
            ).one()
        engine.dispose()
    finally:
        with admin.connect() as connection:
            connection.exec_driver_sql(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
        admin.dispose()
    calls = sum(int(m) for _, m in outputs)  # the trials, and each worker's one re-timing
    busy = sum(float(t) for t, _ in outputs)
    measured, distinct = counts
    return {
        "wall_s": wall,
        "trials_per_s": measured / wall,
        "ideal_per_s": workers / cost,
        "overhead_ms": 1e3 * (busy - calls * cost) / max(measured, 1),
        "measured": measured,
        "duplicates": measured - distinct,
    }


def main() -> int:
    here = Path(__file__).resolve().parent.parent
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--server", required=True, help="PostgreSQL URL whose user may create databases")
    landscapes = sorted(glob.glob(str(here.parent / "shared/landscapes/convolution_A4000.json.gz")))
    parser.add_argument("--landscape", default=landscapes[0] if landscapes else None)
    parser.add_argument("--workers", default="1,2,4,8")
    parser.add_argument("--trials", type=int, default=200)
    parser.add_argument("--cost", type=float, default=0.2, help="Seconds per measurement (simulated).")
    args = parser.parse_args()
    if args.landscape is None:
        parser.error("no landscape found: give --landscape")
    print("workers  wall_s  trials/s  ideal/s  overhead_ms/trial  measured  duplicates")
    for workers in (int(n) for n in args.workers.split(",")):
        r = one(args.server, args.landscape, workers, args.trials, args.cost)
        print(
            f"{workers:7d}  {r['wall_s']:6.1f}  {r['trials_per_s']:8.2f}  {r['ideal_per_s']:7.2f}  "
            f"{r['overhead_ms']:17.1f}  {r['measured']:8d}  {r['duplicates']:10d}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
