"""Small statements built from column names with ``psycopg.sql`` (identifiers quoted, values bound),
for the engines' state tables: no SQL is assembled from f-strings."""

from __future__ import annotations

from collections.abc import Mapping

import psycopg
from psycopg import sql


def _pairs(columns: Mapping[str, object], joiner: str) -> sql.Composed:
    return sql.SQL(joiner).join(sql.SQL("{} = {}").format(sql.Identifier(k), sql.Placeholder(k)) for k in columns)


def update_where(
    conn: psycopg.Connection,
    table: str,
    where: Mapping[str, object],
    values: Mapping[str, object],
    *,
    touch: str | None = "updated_at",
) -> int:
    """``UPDATE table SET values [, touch = now()] WHERE where``; returns the rows updated."""
    if set(where) & set(values):
        raise ValueError(f"columns both set and matched: {sorted(set(where) & set(values))}")
    sets = _pairs(values, ", ")
    if touch is not None:
        sets = sql.SQL("{}, {} = now()").format(sets, sql.Identifier(touch))
    query = sql.SQL("UPDATE {} SET {} WHERE {}").format(sql.Identifier(table), sets, _pairs(where, " AND "))
    return conn.execute(query, {**values, **where}).rowcount


def upsert(conn: psycopg.Connection, table: str, key: Mapping[str, object], values: Mapping[str, object]) -> None:
    """``INSERT key + values ON CONFLICT (key) DO UPDATE SET values``."""
    columns = [*key, *values]
    query = sql.SQL("INSERT INTO {} ({}) VALUES ({}) ON CONFLICT ({}) DO UPDATE SET {}").format(
        sql.Identifier(table),
        sql.SQL(", ").join(map(sql.Identifier, columns)),
        sql.SQL(", ").join(map(sql.Placeholder, columns)),
        sql.SQL(", ").join(map(sql.Identifier, key)),
        sql.SQL(", ").join(sql.SQL("{0} = EXCLUDED.{0}").format(sql.Identifier(k)) for k in values),
    )
    conn.execute(query, {**key, **values})
