"""The README opens with the two commands, stays short, and every relative link of the README and docs/
leads somewhere; .ci/run runs the README's test command. (Settings: tests/unit/test_configuration_doc.py.)"""

import re
from pathlib import Path

TOP = Path(__file__).resolve().parents[2]
#: The README is the front page: what it is, the two commands, the CLI, the UI, deploying, the docs' table.
#: Everything else lives in docs/ (the anchors' READMEs, dagster-open-platform's and Dagster's
#: project_fully_featured, are 1.5-10 KB).
README_MAX_BYTES = 12 * 1024


def readme_commands() -> list[str]:
    return re.findall(r"```bash\n(.+?)\n```", (TOP / "README.md").read_text())


def test_readme_opens_with_run_and_test_commands():
    run, test = readme_commands()[:2]
    assert run == "pip install . && optima-pipelines demo"
    assert test == "pip install -e '.[test]' && pytest"


def test_ci_runs_the_readme_test_command():
    test = readme_commands()[1]
    assert test in (TOP / ".ci" / "run").read_text().splitlines()


def test_readme_stays_short():
    size = len((TOP / "README.md").read_bytes())
    assert size <= README_MAX_BYTES, (
        f"README.md is {size} bytes, over {README_MAX_BYTES}: move the detail to the docs/ page it belongs to"
    )


def _pages() -> list[Path]:
    return [TOP / "README.md", *sorted((TOP / "docs").glob("*.md")), *sorted((TOP / "bench").glob("*.md"))]


def _without_code(text: str) -> str:
    """Markdown with fenced blocks and inline code removed: links and headings are only outside them."""
    text = re.sub(r"^```.*?^```", "", text, flags=re.M | re.S)
    return re.sub(r"`[^`\n]*`", "", text)


def anchors(path: Path) -> set[str]:
    """The #fragments GitHub gives a page's headings: lower case, punctuation dropped, spaces to hyphens,
    a repeated heading suffixed -1, -2..."""
    seen: dict[str, int] = {}
    result = set()
    for line in re.sub(r"^```.*?^```", "", path.read_text(), flags=re.M | re.S).splitlines():
        heading = re.match(r"#{1,6} +(.+?) *#* *$", line)
        if not heading:
            continue
        slug = re.sub(r"[^\w\- ]", "", heading.group(1).strip().lower()).replace(" ", "-")
        count = seen.get(slug, 0)
        seen[slug] = count + 1
        result.add(slug if count == 0 else f"{slug}-{count}")
    return result


def test_anchor_slugs_follow_github():
    page = TOP / "docs" / "data.md"
    assert "rnp_daily-when-it-is-recomputed" in anchors(page)
    assert "user-report-import-import-user-report" in anchors(page)


def test_every_relative_link_resolves():
    broken = []
    for page in _pages():
        for target in re.findall(r"\]\(([^)\s]+)\)", _without_code(page.read_text())):
            if re.match(r"[a-z][a-z0-9+.-]*:", target):  # https:, mailto:
                continue
            file_part, _, fragment = target.partition("#")
            linked = (page.parent / file_part).resolve() if file_part else page
            where = f"{page.relative_to(TOP)}: ({target})"
            if not linked.exists():
                broken.append(f"{where} no such file")
            elif TOP not in linked.parents:
                broken.append(f"{where} leads outside the repository")
            elif fragment and (linked.suffix != ".md" or fragment not in anchors(linked)):
                broken.append(f"{where} no heading #{fragment} in {linked.relative_to(TOP)}")
    assert not broken, "\n".join(broken)


def test_docs_never_point_outside_the_repository():
    """A user of the repository has no ../shared: what the docs need from there is copied into docs/."""
    for page in _pages():
        assert "../shared" not in page.read_text(), page
