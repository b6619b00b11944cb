"""A queue name leads to its code in one step: every queue's domain names modules of the package."""

from __future__ import annotations

import ast
from collections.abc import Callable
from pathlib import Path

from optima_pipelines.orchestration.queues import ASSET_QUEUES, QUEUES

PACKAGE = Path(__file__).resolve().parents[2] / "optima_pipelines"


def test_every_queue_has_a_domain_whose_modules_exist() -> None:
    missing = {q.name: q.domain for q in QUEUES.values() if not any(PACKAGE.glob(f"*/{q.domain}.py"))}
    assert not missing, f"queues whose domain names no module <folder>/<domain>.py: {missing}"


def test_every_queue_constant_is_its_queue() -> None:
    import optima_pipelines.orchestration.queues as queues

    constants = {v for k, v in vars(queues).items() if k.isupper() and isinstance(v, str) and v in QUEUES}
    assert constants == set(QUEUES), "every queue has one constant in the queues module"
    assert set(ASSET_QUEUES.values()) <= set(QUEUES)


def _queue_constants() -> set[str]:
    import optima_pipelines.orchestration.queues as queues

    return {k for k, v in vars(queues).items() if k.isupper() and isinstance(v, str) and v in QUEUES}


#: Where a string equal to a queue's name may stand: module -> which module-level names it may be
#: assigned to. The queues module declares each queue once; the request kinds (the backend's API
#: strings in requests.kind) and the audit's engine names are other words that read like a queue's.
DECLARATIONS: dict[str, Callable[[str], bool]] = {
    "orchestration/queues.py": _queue_constants().__contains__,
    "warehouse/requests.py": lambda name: name.endswith("_KIND"),
    "engines/audit.py": lambda name: name == "ENGINES",  # engine_actions.engine
    "engines/pricing_bulk.py": lambda name: name == "ENGINE",  # its engine_actions.engine
}


def retyped_queue_names(package: Path) -> list[str]:
    """<module>:<line> of every string literal equal to a queue's name outside those declarations."""
    found = []
    for path in sorted(package.rglob("*.py")):
        module = path.relative_to(package).as_posix()
        allowed = DECLARATIONS.get(module, lambda name: False)
        for statement in ast.parse(path.read_text()).body:
            targets = []
            if isinstance(statement, ast.Assign):
                targets = [t.id for t in statement.targets if isinstance(t, ast.Name)]
            elif isinstance(statement, ast.AnnAssign) and isinstance(statement.target, ast.Name):
                targets = [statement.target.id]
            declared = bool(targets) and all(allowed(t) for t in targets)
            for node in ast.walk(statement):
                if isinstance(node, ast.Constant) and node.value in QUEUES and not declared:
                    found.append(f"{module}:{node.lineno}: {node.value!r}")
    return found


def test_no_module_retypes_a_queue_name() -> None:
    found = retyped_queue_names(PACKAGE)
    assert not found, (
        "queue names retyped in optima_pipelines/ instead of imported from orchestration/queues.py "
        f"(a request kind takes its constant from warehouse/requests.py): {found}"
    )


def test_the_scan_names_each_retyped_queue_name(tmp_path: Path) -> None:
    (tmp_path / "sensors").mkdir()
    (tmp_path / "sensors" / "x.py").write_text(
        'QUEUE = "rnp-ads-sync"\n\n\ndef f():\n    return {"q": "re-aggregate"}\n'
    )
    (tmp_path / "warehouse").mkdir()
    (tmp_path / "warehouse" / "requests.py").write_text('CATALOG_SYNC_KIND = "catalog-sync"\nX = "catalog-sync"\n')
    assert retyped_queue_names(tmp_path) == [
        "sensors/x.py:1: 'rnp-ads-sync'",
        "sensors/x.py:5: 're-aggregate'",
        "warehouse/requests.py:2: 'catalog-sync'",
    ]
