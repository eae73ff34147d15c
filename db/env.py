"""Alembic environment for autotune's own tables (version table: autotune_alembic_version)."""

from alembic import context

from autotune.store.models import VERSION_TABLE, Base

config = context.config
connection = config.attributes.get("connection")
if connection is None:  # `alembic -x url=...` from a shell, for developers
    import sqlalchemy as sa

    url = context.get_x_argument(as_dictionary=True).get("url") or config.get_main_option("sqlalchemy.url")
    connection = sa.create_engine(url).connect()

context.configure(
    connection=connection,
    target_metadata=Base.metadata,
    version_table=VERSION_TABLE,
    render_as_batch=True,  # SQLite cannot ALTER most things; batch mode copies the table
)
with context.begin_transaction():
    context.run_migrations()
