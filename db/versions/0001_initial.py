"""First schema: devices, problems, runs, trials, best.

Revision ID: 0001
Revises:
Create Date: 2026-11-29
"""

import sqlalchemy as sa
from alembic import op

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "autotune_devices",
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("platform", sa.String(200), nullable=False),
        sa.Column("name", sa.String(200), nullable=False),
        sa.Column("vendor", sa.String(200), nullable=False),
        sa.Column("driver", sa.String(200), nullable=False),
        sa.Column("type", sa.String(40), nullable=False),
        sa.Column("info", sa.Text, nullable=False),
        sa.UniqueConstraint("platform", "name", "vendor", "driver"),
    )
    op.create_table(
        "autotune_problems",
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("filter_width", sa.Integer, nullable=False),
        sa.Column("out_width", sa.Integer, nullable=False),
        sa.Column("out_height", sa.Integer, nullable=False),
        sa.Column("dtype", sa.String(20), nullable=False),
        sa.UniqueConstraint("filter_width", "out_width", "out_height", "dtype"),
    )
    op.create_table(
        "autotune_runs",
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("device_id", sa.Integer, sa.ForeignKey("autotune_devices.id"), nullable=False),
        sa.Column("key", sa.Text, nullable=False, index=True),
        sa.Column("filter_widths", sa.String(400), nullable=False),
        sa.Column("out_width", sa.Integer, nullable=False),
        sa.Column("out_height", sa.Integer, nullable=False),
        sa.Column("sampler", sa.String(40), nullable=False),
        sa.Column("seed", sa.Integer, nullable=False),
        sa.Column("trials_budget", sa.Integer, nullable=True),
        sa.Column("time_budget_s", sa.Float, nullable=True),
        sa.Column("status", sa.String(20), nullable=False),
        sa.Column("started_at", sa.DateTime, nullable=False),
        sa.Column("finished_at", sa.DateTime, nullable=True),
        sa.Column("tool_version", sa.String(40), nullable=False),
    )
    op.create_table(
        "autotune_trials",
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("run_id", sa.Integer, sa.ForeignKey("autotune_runs.id"), nullable=False, index=True),
        sa.Column("device_id", sa.Integer, sa.ForeignKey("autotune_devices.id"), nullable=False),
        sa.Column("problem_id", sa.Integer, sa.ForeignKey("autotune_problems.id"), nullable=False),
        sa.Column("number", sa.Integer, nullable=False),
        sa.Column("origin", sa.String(20), nullable=False),
        sa.Column("config", sa.Text, nullable=False),
        sa.Column("config_key", sa.Text, nullable=False),
        sa.Column("status", sa.String(20), nullable=False),
        sa.Column("time_ms", sa.Float, nullable=True),
        sa.Column("min_ms", sa.Float, nullable=True),
        sa.Column("max_ms", sa.Float, nullable=True),
        sa.Column("runs", sa.Integer, nullable=False),
        sa.Column("compile_ms", sa.Float, nullable=True),
        sa.Column("max_error", sa.Float, nullable=True),
        sa.Column("error", sa.Text, nullable=True),
        sa.Column("created_at", sa.DateTime, nullable=False),
    )
    op.create_index("ix_autotune_trials_lookup", "autotune_trials", ["device_id", "problem_id", "config_key"])
    op.create_table(
        "autotune_best",
        sa.Column("device_id", sa.Integer, sa.ForeignKey("autotune_devices.id"), primary_key=True),
        sa.Column("problem_id", sa.Integer, sa.ForeignKey("autotune_problems.id"), primary_key=True),
        sa.Column("trial_id", sa.Integer, sa.ForeignKey("autotune_trials.id"), nullable=False),
        sa.Column("config", sa.Text, nullable=False),
        sa.Column("time_ms", sa.Float, nullable=False),
        sa.Column("updated_at", sa.DateTime, nullable=False),
    )


def downgrade() -> None:
    for table in (
        "autotune_best",
        "autotune_trials",
        "autotune_runs",
        "autotune_problems",
        "autotune_devices",
    ):
        op.drop_table(table)
