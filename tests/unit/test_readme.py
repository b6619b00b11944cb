"""The README opens with the two commands, and .ci/run runs the README's test command."""

import re
from pathlib import Path

TOP = Path(__file__).resolve().parents[2]


def readme_commands() -> list[str]:
    return re.findall(r"```bash\n(.+?)\n```", (TOP / "README.md").read_text())


def test_readme_opens_with_run_and_test_commands():
    run, test = readme_commands()[:2]
    assert run.startswith("pip install . && optima-pipelines ")
    assert test == "pip install -e '.[test]' && pytest"


def test_ci_runs_the_readme_test_command():
    test = readme_commands()[1]
    assert test in (TOP / ".ci" / "run").read_text().splitlines()


def test_every_environment_variable_is_documented():
    from optima_pipelines.settings import ENVIRONMENT_VARIABLES

    readme = (TOP / "README.md").read_text()
    for name in ENVIRONMENT_VARIABLES:
        assert f"`{name}`" in readme, name
