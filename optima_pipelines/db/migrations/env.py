"""Alembic environment: migrations run inside the environment's warehouse schema."""

from __future__ import annotations

import sqlalchemy as sa
from alembic import context

config = context.config
schema = config.attributes["schema"]

if context.is_offline_mode():
    # `upgrade(..., sql=True)`: the SQL script instead of a connection (reviewed, or replayed by the tests).
    context.configure(
        url=config.get_main_option("sqlalchemy.url"),
        literal_binds=True,
        version_table_schema=schema,
        transaction_per_migration=True,
    )
    context.execute(f'SET search_path TO "{schema}"')
    with context.begin_transaction():
        context.run_migrations()
else:
    engine = sa.create_engine(config.get_main_option("sqlalchemy.url"), poolclass=sa.pool.NullPool)
    with engine.connect() as connection:
        # Unqualified names in migrations land in this environment's schema.
        connection.execute(sa.text(f'SET search_path TO "{schema}"'))
        connection.commit()
        context.configure(
            connection=connection,
            version_table_schema=schema,
            transaction_per_migration=True,
        )
        with context.begin_transaction():
            context.run_migrations()
    engine.dispose()
