"""Problems are (family, key) instead of convolution columns; runs name their family
and list their problems' keys.

Every convolution row keeps its id: its key is {"filter_width", "out_width",
"out_height", "dtype"} in that order, and a run's problems are its filter widths at its
output size.

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-30
"""

import json

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None

FAMILY = "conv2d"


def _key(filter_width: int, out_width: int, out_height: int, dtype: str) -> str:
    fields = {"filter_width": filter_width, "out_width": out_width, "out_height": out_height, "dtype": dtype}
    return json.dumps(fields, separators=(",", ":"))


def upgrade() -> None:
    bind = op.get_bind()
    problems = bind.execute(
        sa.text("SELECT id, filter_width, out_width, out_height, dtype FROM autotune_problems")
    ).fetchall()
    runs = bind.execute(
        sa.text("SELECT id, filter_widths, out_width, out_height FROM autotune_runs")
    ).fetchall()
    if bind.dialect.name == "sqlite":
        # SQLite cannot drop columns under a UNIQUE constraint: build the table anew
        # (the caller turned foreign key enforcement off for the swap, as SQLite advises).
        op.create_table(
            "autotune_problems_0003",
            sa.Column("id", sa.Integer, primary_key=True),
            sa.Column("family", sa.String(40), nullable=False),
            sa.Column("key", sa.Text, nullable=False),
            sa.UniqueConstraint("family", "key", name="uq_autotune_problems_family_key"),
        )
        op.drop_table("autotune_problems")
        op.rename_table("autotune_problems_0003", "autotune_problems")
    else:
        op.add_column("autotune_problems", sa.Column("family", sa.String(40), nullable=True))
        op.add_column("autotune_problems", sa.Column("key", sa.Text, nullable=True))
        for column in ("filter_width", "out_width", "out_height", "dtype"):
            op.drop_column("autotune_problems", column)  # drops the old unique constraint too
    table = sa.table(
        "autotune_problems",
        sa.column("id", sa.Integer),
        sa.column("family", sa.String),
        sa.column("key", sa.Text),
    )
    if bind.dialect.name == "sqlite":
        rows = [{"id": p.id, "family": FAMILY, "key": _key(*p[1:])} for p in problems]
        if rows:
            op.bulk_insert(table, rows)
    else:
        for p in problems:
            bind.execute(table.update().where(table.c.id == p.id).values(family=FAMILY, key=_key(*p[1:])))
        with op.batch_alter_table("autotune_problems") as batch:
            batch.alter_column("family", existing_type=sa.String(40), nullable=False)
            batch.alter_column("key", existing_type=sa.Text, nullable=False)
            batch.create_unique_constraint("uq_autotune_problems_family_key", ["family", "key"])

    op.add_column("autotune_runs", sa.Column("family", sa.String(40), nullable=True))
    op.add_column("autotune_runs", sa.Column("problems", sa.Text, nullable=True))
    runs_table = sa.table(
        "autotune_runs", sa.column("id", sa.Integer), sa.column("family", sa.String), sa.column("problems")
    )
    for run in runs:
        widths = [int(w) for w in run.filter_widths.split(",") if w.strip()]
        keys = [json.loads(_key(w, run.out_width, run.out_height, "float32")) for w in widths]
        bind.execute(
            runs_table.update()
            .where(runs_table.c.id == run.id)
            .values(family=FAMILY, problems=json.dumps(keys, separators=(",", ":")))
        )
    with op.batch_alter_table("autotune_runs") as batch:
        batch.alter_column("family", existing_type=sa.String(40), nullable=False)
        batch.alter_column("problems", existing_type=sa.Text, nullable=False)
        batch.drop_column("filter_widths")
        batch.drop_column("out_width")
        batch.drop_column("out_height")


def downgrade() -> None:
    raise NotImplementedError("schema 0003 keeps problems of any family; 0002 held convolutions only")
