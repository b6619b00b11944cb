"""docs/ARCHITECTURE.md's layout block names what is in the tree, and the tree has nothing it leaves out."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = "optima_pipelines"


def layout_entries() -> list[str]:
    """Paths of the layout block: package entries get the package prefix; `a|b` alternatives are split."""
    text = (ROOT / "docs" / "ARCHITECTURE.md").read_text()
    block = re.search(r"## Layout\n\n```\n(.*?)```", text, re.S)
    assert block, "docs/ARCHITECTURE.md has no ## Layout code block"
    entries = []
    for line in block.group(1).splitlines():
        if not line.strip():
            continue
        name = line.split()[0]
        prefix = f"{PACKAGE}/" if line.startswith("  ") else ""
        head, _, alternatives = name.partition("|")
        if alternatives:  # tests/unit|db|dagster: tests/unit, tests/db, tests/dagster
            folder = head.rsplit("/", 1)[0]
            entries += [prefix + head] + [f"{prefix}{folder}/{alt}" for alt in alternatives.split("|")]
        else:
            entries.append(prefix + name)
    return entries


def test_every_entry_of_the_layout_exists() -> None:
    missing = []
    for entry in layout_entries():
        # assets/<domain>.py names a folder of modules: the folder must exist and hold .py files.
        path = ROOT / entry.split("<", 1)[0]
        if "<" in entry:
            if not (path.is_dir() and any(path.glob("*.py"))):
                missing.append(entry)
        elif not path.exists():
            missing.append(entry)
    assert not missing, f"docs/ARCHITECTURE.md's layout names what the tree does not have: {missing}"


def test_every_module_and_folder_of_the_package_is_in_the_layout() -> None:
    named = {e.rstrip("/").split("<", 1)[0].rstrip("/") for e in layout_entries()}
    unnamed = [
        f"{PACKAGE}/{p.name}"
        for p in sorted((ROOT / PACKAGE).iterdir())
        if p.name not in ("__init__.py", "__pycache__")
        and (p.suffix == ".py" or p.is_dir())
        and f"{PACKAGE}/{p.name}".removesuffix("/") not in named
    ]
    assert not unnamed, f"docs/ARCHITECTURE.md's layout leaves these out: {unnamed}"
