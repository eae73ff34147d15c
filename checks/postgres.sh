#!/usr/bin/env bash
# A PostgreSQL server for tests/test_postgres.py: installs Debian's package if needed,
# starts the cluster, and creates the role the tests connect as (AUTOTUNE_TEST_POSTGRES,
# default postgresql+psycopg://autotune:autotune@localhost/autotune). Needs root.
set -euo pipefail
if ! command -v pg_ctlcluster >/dev/null; then
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql >/dev/null
fi
version=$(ls /usr/lib/postgresql | sort -n | tail -1)
if ! pg_lsclusters -h | grep -q "^$version main"; then
  pg_createcluster "$version" main >/dev/null
fi
pg_ctlcluster "$version" main start 2>/dev/null || pg_lsclusters -h | grep -q "^$version main .* online"
for _ in $(seq 30); do
  su postgres -c "psql -qtAc 'SELECT 1'" >/dev/null 2>&1 && break
  sleep 1
done
su postgres -c "psql -qtAc \"SELECT 1 FROM pg_roles WHERE rolname = 'autotune'\"" | grep -q 1 \
  || su postgres -c "psql -qc \"CREATE ROLE autotune LOGIN PASSWORD 'autotune' CREATEDB\""
su postgres -c "psql -qtAc \"SELECT 1 FROM pg_database WHERE datname = 'autotune'\"" | grep -q 1 \
  || su postgres -c "psql -qc 'CREATE DATABASE autotune OWNER autotune'"
echo "postgresql $version: ready"
