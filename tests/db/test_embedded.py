"""The embedded PostgreSQL runs with the settings sized for the warehouse's bulk writes."""

from __future__ import annotations

from optima_pipelines.db.connection import connect
from optima_pipelines.db.embedded import SETTINGS, start_embedded


def test_a_new_embedded_server_runs_with_the_warehouse_settings(tmp_path):  # type: ignore[no-untyped-def]
    url = start_embedded(tmp_path / "state")
    with connect(url, autocommit=True) as conn:
        assert {name: conn.execute(f"SHOW {name}").fetchone()[0] for name in SETTINGS} == SETTINGS  # type: ignore[index]
    # Attaching again (another process of the deployment) leaves postgresql.conf including them once.
    assert start_embedded(tmp_path / "state") == url
    assert (tmp_path / "state" / "pgdata" / "postgresql.conf").read_text().count("optima.conf") == 1
