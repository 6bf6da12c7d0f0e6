"""The layers of the code base (docs/architecture.md): the library ``fedhh`` imports neither the
services (``fedhh_coordinator``, ``fedhh_aggregator``, ``fedhh_device``) nor its own command-line
layer (``fedhh.cli``), and no service imports another. Checked on the source, import by import,
including imports inside functions."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SERVICES = ("fedhh_coordinator", "fedhh_aggregator", "fedhh_device")


def imports(path: Path) -> list[tuple[int, str]]:
    tree = ast.parse(path.read_text(), filename=str(path))
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.append((node.lineno, node.module))
    return found


def package_of(path: Path) -> str:
    parts = path.relative_to(ROOT).parts
    if parts[0] == "fedhh":
        return "fedhh.cli" if parts[1:2] == ("cli",) else "fedhh"
    return parts[1]  # server/fedhh_coordinator/... -> fedhh_coordinator


def forbidden(importer: str, module: str) -> bool:
    top = module.split(".")[0]
    if importer == "fedhh":
        return top in SERVICES or module == "fedhh.cli" or module.startswith("fedhh.cli.")
    if importer in SERVICES:
        return (top in SERVICES and top != importer) or module.startswith("fedhh.cli")
    return False  # the CLI may import anything (it starts the services)


def test_no_layer_imports_upwards() -> None:
    sources = [p for folder in ("fedhh", "server", "aggregator", "device")
               for p in (ROOT / folder).rglob("*.py") if "_pb2" not in p.name]
    assert len(sources) > 50
    upward = [f"{p.relative_to(ROOT)}:{line} imports {module}"
              for p in sources for line, module in imports(p)
              if forbidden(package_of(p), module)]
    assert upward == []


def test_the_checker_sees_an_upward_import(tmp_path: Path) -> None:
    assert forbidden("fedhh", "fedhh_coordinator.auth")
    assert forbidden("fedhh", "fedhh.cli.simulate")
    assert forbidden("fedhh_device", "fedhh_coordinator.lobby")
    assert not forbidden("fedhh_coordinator", "fedhh.rounds")
    source = tmp_path / "m.py"
    source.write_text("def f():\n    from fedhh_coordinator.auth import x\n")
    assert imports(source) == [(2, "fedhh_coordinator.auth")]


def _library_imports(folder: str) -> list[str]:
    return [f"{p.relative_to(ROOT)}:{line} imports {module}"
            for p in (ROOT / "fedhh" / folder).rglob("*.py")
            for line, module in imports(p) if module.startswith("fedhh")]


def test_the_device_side_needs_only_the_codec() -> None:
    allowed = ("fedhh.device", "fedhh.codec", "fedhh.errors")
    found = _library_imports("device")
    assert found, "the checker read no import"
    assert [i for i in found if not i.split(" imports ")[1].startswith(allowed)] == []


def test_the_server_side_never_reaches_for_reports_or_the_network() -> None:
    forbidden_here = ("fedhh.simulation", "fedhh.rounds", "fedhh.rpc", "fedhh.secagg",
                      "fedhh.experiments", "fedhh.v1")
    found = _library_imports("server")
    assert found, "the checker read no import"
    assert [i for i in found if i.split(" imports ")[1].startswith(forbidden_here)] == []
