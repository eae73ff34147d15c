#!/usr/bin/env python3
"""Why tests/test_postgres.py tries a database drop again: `DROP DATABASE ... WITH (FORCE)`
by a role without superuser is refused (SQLSTATE 42501) while an autovacuum worker is in
the database. Each round loads a table in a fresh database, drops it a few seconds in, and
counts the refusals; a drop tried again a moment later must succeed.

Autovacuum visits often enough only with a short nap (as the server's superuser):
    su postgres -c "psql -c \\"ALTER SYSTEM SET autovacuum_naptime = '1s'\\" -c 'SELECT pg_reload_conf()'"
    python checks/postgres_drop_race.py --rounds 25
    su postgres -c "psql -c 'ALTER SYSTEM RESET autovacuum_naptime' -c 'SELECT pg_reload_conf()'"
"""

from __future__ import annotations

import argparse
import os
import random
import threading
import time

import sqlalchemy as sa

SERVER = os.environ.get("AUTOTUNE_TEST_POSTGRES", "postgresql+psycopg://autotune:autotune@localhost/autotune")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=25)
    args = parser.parse_args()
    server = sa.create_engine(SERVER, isolation_level="AUTOCOMMIT", poolclass=sa.pool.NullPool)
    refused = 0
    for round_ in range(args.rounds):
        name = f"autotune_drop_race_{round_}"
        with server.connect() as connection:
            connection.exec_driver_sql(f"DROP DATABASE IF EXISTS {name}")
            connection.exec_driver_sql(f"CREATE DATABASE {name}")
        url = sa.make_url(SERVER).set(database=name)
        database = sa.create_engine(url, isolation_level="AUTOCOMMIT", poolclass=sa.pool.NullPool)

        def load(database: sa.Engine = database) -> None:
            try:  # until the drop ends this session
                with database.connect() as connection:
                    connection.exec_driver_sql("CREATE TABLE t (a int)")
                    while True:
                        connection.exec_driver_sql("INSERT INTO t SELECT generate_series(1, 20000)")
                        connection.exec_driver_sql("DELETE FROM t WHERE mod(a, 2) = 0")
            except sa.exc.DBAPIError:
                pass

        threading.Thread(target=load, daemon=True).start()
        time.sleep(random.Random(round_).uniform(2, 5))
        for _ in range(300):
            try:
                with server.connect() as connection:
                    connection.exec_driver_sql(f"DROP DATABASE {name} WITH (FORCE)")
                break
            except sa.exc.ProgrammingError as exc:
                if exc.orig is None or exc.orig.sqlstate != "42501":
                    raise
                refused += 1
                time.sleep(0.2)
        else:
            raise SystemExit(f"round {round_}: the drop was refused for a minute")
        database.dispose()
    print(f"{args.rounds} drops; refused (42501) and tried again: {refused} times; every drop succeeded")


if __name__ == "__main__":
    main()
