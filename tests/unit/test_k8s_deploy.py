"""Kubernetes, as far as this machine can check it (no Helm, no cluster, no Docker engine: docs/deploy.md).

- deploy/k8s/values.yaml against the official chart's values.schema.json (deploy/k8s/dagster-chart/);
- the K8sRunLauncher those values configure, and the warm (Celery) run workers of dagster.yaml,
  through Dagster's own config validation with the pinned dagster-k8s / dagster-celery;
- the Dockerfile that builds the image the values name, read statically.
"""

from __future__ import annotations

import copy
import json
import re
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml
from referencing import Registry, Resource

ROOT = Path(__file__).resolve().parents[2]
CHART = ROOT / "deploy" / "k8s" / "dagster-chart"
VALUES = ROOT / "deploy" / "k8s" / "values.yaml"
DOCKERFILE = ROOT / "Dockerfile"
#: The Kubernetes object schemas the chart's schema points at (kubernetesjsonschema.dev): not
#: available here, so any value is accepted where they apply (resources, probes, env sources...).
K8S_SCHEMAS = "https://kubernetesjsonschema.dev/"


def schema() -> dict[str, Any]:
    return json.loads((CHART / "values.schema.json").read_text())


def values() -> dict[str, Any]:
    return yaml.safe_load(VALUES.read_text())


def as_checked_here(node: Any) -> Any:
    """The schema as this suite can apply it:

    - every `required` list dropped: Helm validates our file merged over the chart's own values.yaml,
      which supplies the keys we leave out (that file is not here); every key we set is still checked
      (its type, its enum, no unknown key where the chart forbids them);
    - a reference to a Kubernetes object schema (kubernetesjsonschema.dev, not reachable here) dropped:
      the chart's own coarse type beside it (object, array of objects, map of strings) stands in."""
    if isinstance(node, dict):
        ref = node.get("$ref", "")
        return {
            k: as_checked_here(v)
            for k, v in node.items()
            if k != "required" and not (k == "$ref" and ref.startswith(K8S_SCHEMAS))
        }
    if isinstance(node, list):
        return [as_checked_here(v) for v in node]
    return node


def validator() -> jsonschema.Draft7Validator:
    def retrieve(uri: str) -> Resource:
        raise AssertionError(f"the chart's schema refers to {uri}, which is not here")

    checked = as_checked_here(schema())
    assert K8S_SCHEMAS not in json.dumps(checked)
    return jsonschema.Draft7Validator(checked, registry=Registry(retrieve=retrieve))


def errors(document: dict[str, Any]) -> list[str]:
    """Each mistake with its place; under an `anyOf` (such as a value or null), what each branch says."""

    def leaves(error: jsonschema.ValidationError) -> list[jsonschema.ValidationError]:
        return [leaf for sub in error.context for leaf in leaves(sub)] if error.context else [error]

    return [
        f"{'.'.join(str(p) for p in leaf.absolute_path)}: {leaf.message}"
        for error in validator().iter_errors(document)
        for leaf in leaves(error)
    ]


def test_the_vendored_schema_is_the_charts_with_its_licence_and_source() -> None:
    loaded = schema()
    assert loaded["title"] == "DagsterHelmValues"
    # The parts of the chart our values use are there (a truncated or foreign file would lack them).
    for name in ("K8sRunLauncherConfig", "RunCoordinator", "UserDeployment", "Webserver", "Daemon", "PostgreSQL"):
        assert name in loaded["definitions"], name
    assert "Apache License" in (CHART / "LICENSE").read_text()
    readme = (CHART / "README.md").read_text()
    assert "bdb8547fab497826eeec292bc160b549a0a329ef" in readme
    import hashlib

    digest = hashlib.sha256((CHART / "values.schema.json").read_bytes()).hexdigest()
    assert digest in readme, "README.md names the file's SHA-256: update it with the file"


def test_the_helm_values_are_valid_for_the_charts_schema() -> None:
    assert errors(values()) == []


@pytest.mark.parametrize(
    ("path", "bad", "complaint"),
    [
        (("runLauncher", "type"), "K8sRunLauncherr", "is not one of"),
        (("runLauncher", "config", "k8sRunLauncher", "loadInClusterConfig"), True, "Additional properties"),
        (("dagsterDaemon", "runCoordinator", "config", "customRunCoordinator", "klass"), "X", "Additional properties"),
        (("dagsterWebserver", "service", "port"), "80", "is not of type 'integer'"),
        (("retention", "sensor", "purgeAfterDays", "skipped"), "1d", "'1d' is not of type 'integer'"),
    ],
)
def test_the_validation_names_a_mistake_in_the_values(path: tuple[str, ...], bad: Any, complaint: str) -> None:
    """The check can fail: a typo, a wrong type or an unknown key is named with its place."""
    document = copy.deepcopy(values())
    node = document
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = bad
    found = errors(document)
    assert found, f"{'.'.join(path)} = {bad!r} passed"
    assert any(complaint in e for e in found), found


def k8s_run_launcher_config() -> dict[str, Any]:
    """What the chart renders into the instance's `run_launcher.config` for our values (its
    `_k8s-run-launcher` helper: the camelCase keys in snake_case, plus the instance's ConfigMap, the
    PostgreSQL password Secret and DAGSTER_HOME, which the chart fills from the release)."""
    launcher = values()["runLauncher"]["config"]["k8sRunLauncher"]
    snake = {re.sub(r"(?<!^)(?=[A-Z])", "_", key).lower(): value for key, value in launcher.items()}
    # The chart's Secret and ConfigMap references ({name: ...}) become their names.
    for key in ("env_secrets", "env_config_maps"):
        snake[key] = [item["name"] for item in snake.get(key, [])]
    return {
        **snake,
        "instance_config_map": "optima-dagster-instance",
        "postgres_password_secret": values()["global"]["postgresqlSecretName"],
        "dagster_home": values()["global"]["dagsterHome"],
        "job_namespace": "optima",
        "service_account_name": "optima-dagster",
    }


def test_the_k8s_run_launcher_config_passes_dagster_k8s_own_validation() -> None:
    from dagster._config import process_config
    from dagster_k8s import K8sRunLauncher

    config = k8s_run_launcher_config()
    result = process_config(K8sRunLauncher.config_type(), config)
    assert result.success, [e.message for e in result.errors or []]
    assert result.value["env_secrets"] == ["optima-env"]
    assert result.value["fail_pod_on_run_failure"] is True
    # And it refuses what dagster-k8s does not know (the check is real).
    wrong = process_config(K8sRunLauncher.config_type(), {**config, "env_secret": ["optima-env"]})
    assert not wrong.success


def test_dagster_k8s_is_the_release_of_the_dagster_pin() -> None:
    import dagster
    import dagster_k8s

    minor = int(dagster.__version__.split(".")[1])
    assert dagster_k8s.__version__.split(".")[:2] == ["0", str(minor + 16)]
    assert dagster_k8s.__version__.split(".")[2] == dagster.__version__.split(".")[2]
    setup = (ROOT / "setup.py").read_text()
    assert '"k8s": [f"dagster-k8s=={DAGSTER_LIBS_VERSION}"]' in setup
    assert f'DAGSTER_LIBS_VERSION = "{dagster_k8s.__version__}"' in setup


def test_the_warm_run_workers_launcher_loads_through_dagsters_instance_config(tmp_path: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """dagster.yaml's run launcher, as a Dagster process loads it: the instance config is validated by
    Dagster, and the launcher class rehydrated from it (its config schema applied) is the warm one,
    with its Celery app on the embedded broker."""
    from dagster._core.instance.config import dagster_instance_config

    from optima_pipelines.operations.runtime import project_file
    from optima_pipelines.orchestration import run_launcher

    (tmp_path / "dagster.yaml").write_text(project_file("dagster.yaml").read_text())
    monkeypatch.setenv("OPTIMA_RUN_LAUNCHER", "celery")
    monkeypatch.setenv("OPTIMA_DAGSTER_STORAGE_URL", "postgresql+psycopg2://u@db:5432/optima")
    monkeypatch.delenv("OPTIMA_RUN_WORKER_BROKER_URL", raising=False)
    config, _ = dagster_instance_config(str(tmp_path))
    from dagster._serdes import ConfigurableClassData

    data = ConfigurableClassData(
        config["run_launcher"]["module"],
        config["run_launcher"]["class"],
        yaml.safe_dump(config["run_launcher"].get("config") or {}),
    )
    launcher = data.rehydrate(as_type=run_launcher.OptimaRunLauncher)
    assert isinstance(launcher.inner, run_launcher.WarmRunLauncher)
    app = run_launcher.make_celery_app()
    assert app.conf.broker_url.startswith(f"{run_launcher.SQLA_TRANSPORT_ALIAS}+postgresql+psycopg2://")
    with pytest.raises(Exception, match="config"):
        ConfigurableClassData(data.module_name, data.class_name, "workers: 3\n").rehydrate(
            as_type=run_launcher.OptimaRunLauncher
        )


def dockerfile_stages() -> list[dict[str, Any]]:
    stages: list[dict[str, Any]] = []
    args: dict[str, str] = {}
    for raw in DOCKERFILE.read_text().replace("\\\n", " ").splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        word, _, rest = line.partition(" ")
        word = word.upper()
        if word == "ARG" and not stages:
            name, _, default = rest.partition("=")
            args[name] = default
        elif word == "FROM":
            image = re.sub(r"\$\{(\w+)\}", lambda m: args[m.group(1)], rest.split(" AS ")[0].split(" as ")[0].strip())
            stages.append({"image": image, "lines": []})
        else:
            stages[-1]["lines"].append((word, rest))
    return stages


def test_the_dockerfile_builds_a_pinned_multi_stage_non_root_image_of_this_package() -> None:
    """Read statically: no Docker engine runs here, so the image is not built by the suite (docs/deploy.md)."""
    stages = dockerfile_stages()
    assert len(stages) >= 2, "a build stage and a runtime stage"
    for stage in stages:
        repo, _, tag = stage["image"].partition(":")
        assert repo == "python" and re.fullmatch(r"3\.11\.\d+-slim-bookworm(@sha256:[0-9a-f]{64})?", tag), stage[
            "image"
        ]
    build, runtime = stages[0], stages[-1]
    runs = " ".join(rest for word, rest in build["lines"] if word == "RUN")
    assert "pip install" in runs and ".[k8s]" in runs, "the build installs the package with its k8s extra"
    for word, rest in build["lines"]:
        if word == "COPY" and not rest.startswith("--from"):
            for source in rest.split()[:-1]:
                assert (ROOT / source).exists(), f"COPY {source}: no such file in the repository"
    users = [rest for word, rest in runtime["lines"] if word == "USER"]
    assert users and users[-1].split(":")[0] not in ("root", "0"), "the runtime stage runs as a non-root user"
    assert any(word == "COPY" and rest.startswith("--from=") for word, rest in runtime["lines"])
    cmd = json.loads(next(rest for word, rest in runtime["lines"] if word == "CMD"))
    assert cmd[:3] == ["dagster", "code-server", "start"]
    assert cmd[cmd.index("-m") + 1] == "optima_pipelines.definitions"
    env = " ".join(rest for word, rest in runtime["lines"] if word == "ENV")
    assert f"DAGSTER_HOME={values()['global']['dagsterHome']}" in env


def test_every_image_the_values_name_is_the_one_the_dockerfile_builds_at_the_package_version() -> None:
    setup = (ROOT / "setup.py").read_text()
    version = re.search(r'version="([^"]+)"', setup)
    assert version
    v = values()
    images = [d["image"] for d in v["dagster-user-deployments"]["deployments"]]
    images += [v["dagsterWebserver"]["image"], v["dagsterDaemon"]["image"]]
    assert {(i["repository"], str(i["tag"])) for i in images} == {
        ("registry.example.com/optima/optima-pipelines", version.group(1))
    }
    deployment = v["dagster-user-deployments"]["deployments"][0]
    args = deployment["codeServerArgs"]
    assert args[args.index("--module-name") + 1] == "optima_pipelines.definitions"
    assert (ROOT / ".dockerignore").exists()
