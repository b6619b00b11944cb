"""The Celery app of the warm run workers: ``celery -A optima_pipelines.orchestration.run_workers worker``.

``optima-pipelines serve run-worker`` runs that command on the deployment's environment; see
orchestration/run_launcher.py for what a run worker does.
"""

from __future__ import annotations

from optima_pipelines.orchestration.run_launcher import make_worker_app

app = make_worker_app()
