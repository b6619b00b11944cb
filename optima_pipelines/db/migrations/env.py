"""Alembic environment: migrations run inside the environment's warehouse schema."""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa
from alembic import context

config = context.config
schema = config.attributes["schema"]
url = config.get_main_option("sqlalchemy.url")
# Unqualified names in migrations land in this environment's schema.
search_path = f'SET search_path TO "{schema}"'


def run_migrations(*, script_search_path: bool = False, **configure: Any) -> None:
    context.configure(version_table_schema=schema, transaction_per_migration=True, **configure)
    if script_search_path:
        context.execute(search_path)
    with context.begin_transaction():
        context.run_migrations()


if context.is_offline_mode():
    # `upgrade(..., sql=True)`: the SQL script instead of a connection (reviewed, or replayed by the tests).
    run_migrations(url=url, literal_binds=True, script_search_path=True)
else:
    engine = sa.create_engine(url, poolclass=sa.pool.NullPool)
    with engine.connect() as connection:
        connection.execute(sa.text(search_path))
        connection.commit()
        run_migrations(connection=connection)
    engine.dispose()
