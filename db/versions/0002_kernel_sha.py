"""Trials record which kernel was measured, so a newer template's kernels are measured
again instead of being answered with an older kernel's time.

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-30
"""

import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("autotune_trials", sa.Column("kernel_sha", sa.String(64), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("autotune_trials") as batch:
        batch.drop_column("kernel_sha")
