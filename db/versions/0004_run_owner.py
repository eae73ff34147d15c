"""Runs name the process searching them and when it last said so (a lease), so two
identical searches never both measure one run.

Revision ID: 0004
Revises: 0003
Create Date: 2026-12-01
"""

import sqlalchemy as sa
from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("autotune_runs", sa.Column("owner", sa.String(300), nullable=True))
    op.add_column("autotune_runs", sa.Column("heartbeat_at", sa.DateTime(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("autotune_runs") as batch:
        batch.drop_column("heartbeat_at")
        batch.drop_column("owner")
