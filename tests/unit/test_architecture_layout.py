"""docs/ARCHITECTURE.md's layout block names what is in the tree, and the tree has nothing it leaves out."""

from __future__ import annotations

import ast
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


def layers() -> list[str]:
    """The layering rule as docs/ARCHITECTURE.md states it: `Layers: definitions → sensors → ...`."""
    text = (ROOT / "docs" / "ARCHITECTURE.md").read_text()
    rule = re.search(r"^Layers: `([^`]+)`", text, re.M)
    assert rule, "docs/ARCHITECTURE.md states no `Layers: ...` rule"
    return [name.strip() for name in rule.group(1).split("→")]


def upward_imports(package: Path, order: list[str]) -> list[str]:
    """`<module>:<line> imports <module>` for every import (at any depth of the module) of a layer
    above the importer's."""
    rank = {name: n for n, name in enumerate(order)}
    found = []
    for path in sorted(package.rglob("*.py")):
        module = path.relative_to(package).as_posix()
        own = rank.get(module.split("/")[0].removesuffix(".py"))
        if own is None:
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                names = [node.module] + [f"{node.module}.{a.name}" for a in node.names]
            elif isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            else:
                continue
            for name in names:
                parts = name.split(".")
                layer = rank.get(parts[1]) if parts[0] == package.name and len(parts) > 1 else None
                if layer is not None and layer < own:
                    found.append(f"{module}:{node.lineno} imports {name}")
                    break
    return found


def test_no_module_imports_a_layer_above_its_own() -> None:
    upward = upward_imports(ROOT / PACKAGE, layers())
    assert not upward, f"imports against docs/ARCHITECTURE.md's Layers rule: {upward}"


def test_the_layer_check_names_an_upward_import(tmp_path: Path) -> None:
    package = tmp_path / PACKAGE
    (package / "jobs").mkdir(parents=True)
    (package / "jobs" / "x.py").write_text(
        f"from {PACKAGE}.sync import runs\n\n\ndef f():\n    from {PACKAGE}.assets.y import z\n"
    )
    assert upward_imports(package, ["assets", "jobs", "sync"]) == [f"jobs/x.py:5 imports {PACKAGE}.assets.y"]


def test_the_layers_hold_the_mart_the_orchestration_and_the_change_record() -> None:
    """The folders whose imports once ran back up (issue 35: orchestration's planner and
    materializations imported sync) are in the rule, so the check above covers them: the mart sits
    above the syncs, orchestration below them, and the change record below everything."""
    order = layers()
    assert {"mart", "orchestration", "changes"} <= set(order), f"the Layers rule leaves them out: {order}"
    assert order.index("mart") < order.index("sync") < order.index("orchestration") < order.index("changes")


def test_an_orchestration_module_importing_a_sync_is_named(tmp_path: Path) -> None:
    package = tmp_path / PACKAGE
    (package / "orchestration").mkdir(parents=True)
    (package / "orchestration" / "materializations.py").write_text(
        f"from {PACKAGE}.changes import FeedChange\nfrom {PACKAGE}.sync.runs import FeedLoad\n"
    )
    assert upward_imports(package, ["mart", "sync", "orchestration", "changes"]) == [
        f"orchestration/materializations.py:2 imports {PACKAGE}.sync.runs"
    ]
