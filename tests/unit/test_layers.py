"""The layers of the code base (docs/architecture.md), checked on the source, import by import,
including imports inside functions:

- inside the library ``fedhh`` every subpackage (and top-level module) is a layer of its own,
  in the order of ``LIBRARY``: a layer imports only the layers below it;
- the library imports neither the services (``fedhh_coordinator``, ``fedhh_aggregator``,
  ``fedhh_device``) nor its command-line layer (``fedhh.cli``), and no service imports another;
- the network stack (``fedhh.v1``, ``fedhh.rpc``, gRPC, aiohttp, uvloop, the metrics exporter,
  the PostgreSQL driver) is imported only by ``fedhh.rpc``, the CLI and the services: no
  library layer below or above the wire layer (the simulator, the studies) reaches for it;
- no service imports the simulator, the studies or their plots (offline code, seeded
  randomness);
- the device process (``fedhh_device``) reaches, through every import of every module it
  imports, none of the server side: the prefix tree and its estimates (``fedhh.server``), the
  round driver, the accountants, PI-RAPPOR's mechanism, the run configuration, the ports'
  servers (Connect's, the framed port's, the procedures they serve), the other services;
- the CLI imports the network stack and the services only inside its commands' functions;
- no two modules import each other, directly or through others (no import cycle);
- no public class name is defined twice across the packages (a name says which one it is);
- the folders read are every package the distribution installs (pyproject.toml's
  ``packages.find``): a new service's package is checked as soon as it is added."""

from __future__ import annotations

import ast
import fnmatch
import functools
import re
import shutil
import tomllib
from collections import defaultdict
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SERVICES = ("fedhh_coordinator", "fedhh_aggregator", "fedhh_device")
FOLDERS = {"fedhh": "fedhh", "server": "fedhh_coordinator", "aggregator": "fedhh_aggregator",
           "device": "fedhh_device"}
# The library's layers, lowest first (docs/architecture.md draws them).
LIBRARY = (
    "fedhh.v1",          # generated wire code
    "fedhh.errors",      # one base class
    "fedhh.integers",    # the one exact reader of an integer written as text
    "fedhh.lazy",        # packages' names imported on first use
    "fedhh.backoff",     # the pauses between a retry loop's tries
    "fedhh.input_files",  # files read whole, to a bound
    "fedhh.codec",       # items <-> prefix codes
    "fedhh.data",        # datasets; the codebooks' training data
    "fedhh.output_paths",  # output paths checked before the work (the CLI's, the services')
    "fedhh.device",      # what a device computes
    "fedhh.privacy",     # accountants, ledger
    "fedhh.secagg",      # SecAgg+ state machines and primitives
    "fedhh.server",      # what follows from a round's sum
    "fedhh.pirappor",    # the second local randomizer, a server mechanism
    "fedhh.config",      # RunConfig: every knob, validated against the pieces above
    "fedhh.metrics",
    "fedhh.rounds",      # the round driver
    "fedhh.rpc",         # wire conversions, clients, TLS
    "fedhh.simulation",
    "fedhh.experiments",
    "fedhh.plot",
)
# The network stack, and the only layers that may import it (``fedhh.v1`` is generated code
# that imports grpc; the CLI imports it inside the commands that serve or call services).
NETWORK = ("fedhh.v1", "fedhh.rpc", "grpc", "grpc_health", "grpc_reflection", "aiohttp",
           "uvloop", "prometheus_client", "psycopg")
NETWORKED = ("fedhh.v1", "fedhh.rpc", "fedhh.cli", *SERVICES)
# Offline code no service imports: the simulator, the studies and their plots.
OFFLINE = ("fedhh.simulation", "fedhh.experiments", "fedhh.plot")


@functools.cache
def _parse(text: str, filename: str) -> tuple[ast.Module, tuple[ast.AST, ...]]:
    tree = ast.parse(text, filename=filename)
    return tree, tuple(ast.walk(tree))


def parsed(path: Path) -> ast.Module:
    """``path``'s syntax tree, parsed once per text (the checks here walk every module several
    times; none changes a tree)."""
    return _parse(path.read_text(), str(path))[0]


def walked(path: Path) -> tuple[ast.AST, ...]:
    """Every node of ``path``'s syntax tree (``ast.walk``'s order), listed once per text."""
    return _parse(path.read_text(), str(path))[1]


@pytest.fixture(autouse=True, scope="module")
def _forget_the_trees() -> Iterator[None]:
    """The trees are dropped after this module's tests: kept, their millions of nodes would
    stay in the test process, each of the cycle collector's full passes walking them."""
    yield
    _parse.cache_clear()


def write_tree(root: Path, files: dict[str, str]) -> None:
    """A small tree of modules under ``root`` (path -> source), for a check to read."""
    for path, code in files.items():
        (root / path).parent.mkdir(parents=True, exist_ok=True)
        (root / path).write_text(code)


def module_names(root: Path) -> dict[str, Path]:
    """Every module of the packages under ``root``, by dotted name."""
    found = {}
    for folder, package in FOLDERS.items():
        base = root / folder if folder == "fedhh" else root / folder / package
        for path in base.rglob("*.py"):
            if "_pb2" in path.name:
                continue
            parts = (package, *path.relative_to(base).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts = parts[:-1]
            found[".".join(parts)] = path
    return found


def _type_checking_only(tree: ast.AST) -> set[int]:
    """The ids of the nodes inside ``if TYPE_CHECKING:`` blocks (imported for the type checker
    alone: at run time nothing there is imported)."""
    inside: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and (
                (isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING")
                or (isinstance(node.test, ast.Attribute) and node.test.attr == "TYPE_CHECKING")):
            inside.update(id(n) for child in node.body for n in ast.walk(child))
    return inside


def _in_functions(tree: ast.AST) -> set[int]:
    """The ids of the nodes inside functions (run when called, not when the module loads)."""
    return {id(n) for node in ast.walk(tree)
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))
            for child in ast.iter_child_nodes(node) for n in ast.walk(child)}


def imports(path: Path, name: str = "", runtime: bool = False,
            on_load: bool = False) -> list[tuple[int, str]]:
    """(line, module) for every import in ``path``, at any depth; relative imports resolved
    against the module's dotted ``name``; ``from m import x`` names ``m.x``, the submodule if
    there is one (the import graph strips what is not a module: ``m.x`` -> ``m``). With
    ``runtime``, those a run makes only: not the ``if TYPE_CHECKING:`` ones; with ``on_load``
    as well, those loading the module makes: not the ones inside functions."""
    tree = parsed(path)
    package = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
    skipped = _type_checking_only(tree) if runtime or on_load else set()
    if on_load:
        skipped |= _in_functions(tree)
    found = []
    for node in walked(path):
        if id(node) in skipped:
            continue
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            module = node.module or ""
            if node.level:
                base = package[:len(package) - node.level + 1]
                module = ".".join([*base, *([module] if module else [])])
            found += [(node.lineno, f"{module}.{alias.name}") for alias in node.names]
    return found


def layer_of(module: str) -> str | None:
    """The library layer (or service, or ``fedhh.cli``) a dotted name belongs to."""
    top = module.split(".")[0]
    if top in SERVICES:
        return top
    if module == "fedhh.cli" or module.startswith("fedhh.cli."):
        return "fedhh.cli"
    return next((layer for layer in LIBRARY
                 if module == layer or module.startswith(layer + ".")), None)


def _within(module: str, packages: tuple[str, ...]) -> bool:
    return any(module == p or module.startswith(p + ".") for p in packages)


def forbidden(importer: str, module: str) -> bool:
    """Whether module ``importer`` may not import ``module``."""
    mine, theirs = layer_of(importer), layer_of(module)
    if mine not in NETWORKED and _within(module, NETWORK):
        return True  # the network stack, outside the wire layer, the CLI and the services
    if mine in SERVICES and theirs in OFFLINE:
        return True  # a service runs no simulation, study or plot
    if theirs is None or mine == theirs or mine == "fedhh.cli":
        return False  # outside the packages, the bare ``fedhh``, inside a layer, or the CLI
    if theirs == "fedhh.cli" or theirs in SERVICES:
        return True  # only the CLI starts services; no service imports another
    if mine in SERVICES or mine is None:
        return False  # a service (or the bare package) may use every library layer
    return LIBRARY.index(theirs) > LIBRARY.index(mine)


def upward_imports(root: Path) -> list[str]:
    return [f"{path.relative_to(root)}:{line} imports {module}"
            for name, path in module_names(root).items()
            for line, module in imports(path, name) if forbidden(name, module)]


def test_no_layer_imports_upwards() -> None:
    assert len(module_names(ROOT)) > 50
    assert upward_imports(ROOT) == []


def test_every_library_package_has_its_layer() -> None:
    packages = {"fedhh." + p.stem for p in (ROOT / "fedhh").iterdir()
                if (p.suffix == ".py" or (p / "__init__.py").exists())
                and p.stem not in ("__init__", "cli")}
    assert packages == set(LIBRARY)


def test_the_checker_sees_an_upward_import(tmp_path: Path) -> None:
    assert forbidden("fedhh.rounds", "fedhh_coordinator.auth")
    assert forbidden("fedhh.server.prune", "fedhh.cli.simulate")
    assert forbidden("fedhh_device.fleet", "fedhh_coordinator.lobby")
    assert forbidden("fedhh.config", "fedhh.rounds")
    assert forbidden("fedhh.codec.codes", "fedhh.data.wordlists")
    assert not forbidden("fedhh_coordinator.link", "fedhh.rounds")
    assert not forbidden("fedhh.server.prefixtree", "fedhh.codec.codes")
    assert not forbidden("fedhh.server.prefixtree", "fedhh.server.segment")
    # The network stack, from outside the wire layer (below it or above it), and offline code
    # from a service.
    assert forbidden("fedhh.simulation.rounds", "grpc.aio")
    assert forbidden("fedhh.experiments.runner", "fedhh.rpc.control_client")
    assert forbidden("fedhh.secagg.server", "fedhh.v1.aggregator_pb2")
    assert forbidden("fedhh.server", "aiohttp.web")
    assert forbidden("fedhh", "grpc")
    assert forbidden("fedhh_device.fleet", "fedhh.simulation.population")
    assert forbidden("fedhh_coordinator.runner", "fedhh.experiments")
    assert forbidden("fedhh_aggregator.main", "fedhh.plot")
    assert not forbidden("fedhh.rpc.serving", "grpc.aio")
    assert not forbidden("fedhh.rpc.tls", "fedhh.v1.aggregator_pb2")
    assert not forbidden("fedhh.cli.health", "grpc_health.v1")
    assert not forbidden("fedhh_coordinator.db.postgres", "psycopg")
    assert not forbidden("fedhh.simulation.runner", "numpy")
    assert not forbidden("fedhh.cli.simulate", "fedhh.simulation")
    source = tmp_path / "m.py"
    source.write_text("def f():\n    from fedhh_coordinator.auth import x\n")
    assert imports(source) == [(2, "fedhh_coordinator.auth.x")]


def _copy_packages(tmp_path: Path) -> None:
    for folder in FOLDERS:
        shutil.copytree(ROOT / folder, tmp_path / folder,
                        ignore=shutil.ignore_patterns("*_pb2*", "__pycache__", "books"))


def _plant(tmp_path: Path, layer: str, code: str) -> Path:
    """Append ``code`` to the copied ``layer`` (its planted.py for a package); the path."""
    where = tmp_path / Path(*layer.split("."))
    path = where / "planted.py" if where.is_dir() else where.with_suffix(".py")
    with path.open("a") as out:
        out.write("\n\n" + code)
    return path.relative_to(tmp_path)


def test_a_planted_upward_import_fails_the_check(tmp_path: Path) -> None:
    # A temporary copy of the packages, with one upward import planted (inside a function, as
    # the lazy ones were) between every two library layers: each is reported.
    _copy_packages(tmp_path)
    assert upward_imports(tmp_path) == []
    planted = []
    for low, lower in enumerate(LIBRARY):
        for upper in LIBRARY[low + 1:]:
            path = _plant(tmp_path, lower, f"def planted_{upper.split('.')[1]}():\n"
                                           f"    import {upper}\n")
            planted.append((path, upper))
    found = upward_imports(tmp_path)
    assert len(found) == len(planted) == len(LIBRARY) * (len(LIBRARY) - 1) // 2
    for path, upper in planted:
        assert any(f.startswith(f"{path}:") and f.endswith(f" imports {upper}") for f in found)


def import_graph(root: Path) -> dict[str, set[str]]:
    """Module -> the project's modules it imports, at module level or inside functions."""
    names = module_names(root)
    graph: dict[str, set[str]] = defaultdict(set)
    for name, path in names.items():
        for _, module in imports(path, name):
            while module and module not in names:
                module = module.rpartition(".")[0]
            if module and module != name:
                graph[name].add(module)
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found = []
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph.get(child, ())))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def test_no_import_cycle() -> None:
    graph = import_graph(ROOT)
    assert len(graph) > 50
    assert cycles(graph) == []


def test_the_cycle_check_sees_a_cycle(tmp_path: Path) -> None:
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": set()}) == []
    package = tmp_path / "fedhh"
    package.mkdir()
    (package / "one.py").write_text("from fedhh.two import x\n")
    (package / "two.py").write_text("def f():\n    from fedhh import one\n")
    assert cycles(import_graph(tmp_path)) == [["fedhh.one", "fedhh.two"]]


def test_no_public_class_name_is_defined_twice() -> None:
    where = defaultdict(list)
    for name, path in module_names(ROOT).items():
        for node in parsed(path).body:
            if isinstance(node, ast.ClassDef) and not node.name.startswith("_"):
                where[node.name].append(f"{name}:{node.lineno}")
    assert len(where) > 100
    assert {n: places for n, places in where.items() if len(places) > 1} == {}


def _library_imports(folder: str, root: Path = ROOT) -> list[str]:
    """``fedhh.<folder>``'s imports of ``fedhh``, relative ones resolved against the module's
    name (before, none was passed, so ``from ..simulation import x`` read as ``simulation.x``)."""
    return [f"{path.relative_to(root)}:{line} imports {module}"
            for name, path in module_names(root).items()
            if name == f"fedhh.{folder}" or name.startswith(f"fedhh.{folder}.")
            for line, module in imports(path, name) if module.startswith("fedhh")]


DEVICE_ALLOWED = ("fedhh.device", "fedhh.codec", "fedhh.errors")
SERVER_FORBIDDEN = ("fedhh.simulation", "fedhh.rounds", "fedhh.rpc", "fedhh.secagg",
                    "fedhh.experiments", "fedhh.v1", "fedhh.pirappor")


def device_side_breaches(root: Path = ROOT) -> list[str]:
    return [i for i in _library_imports("device", root)
            if not _within(i.split(" imports ")[1], DEVICE_ALLOWED)]


def server_side_breaches(root: Path = ROOT) -> list[str]:
    return [i for i in _library_imports("server", root)
            if _within(i.split(" imports ")[1], SERVER_FORBIDDEN)]


def test_the_device_side_needs_only_the_codec() -> None:
    assert _library_imports("device"), "the checker read no import"
    assert device_side_breaches() == []


def test_the_server_side_never_reaches_for_reports_or_the_network() -> None:
    assert _library_imports("server"), "the checker read no import"
    assert server_side_breaches() == []


def test_planted_device_and_server_breaches_are_reported(tmp_path: Path) -> None:
    # Relative imports too: the device side reaching for the data layer, the server side for
    # the simulator, each inside a function.
    _copy_packages(tmp_path)
    device = _plant(tmp_path, "fedhh.device", "def planted():\n    from ..data import jsonl\n")
    server = _plant(tmp_path, "fedhh.server",
                    "def planted():\n    from ..simulation import runner\n")
    assert [f for f in device_side_breaches(tmp_path) if f.startswith(f"{device}:")] == [
        f"{device}:4 imports fedhh.data.jsonl"]
    assert [f for f in server_side_breaches(tmp_path) if f.startswith(f"{server}:")] == [
        f"{server}:4 imports fedhh.simulation.runner"]



def test_a_planted_network_import_fails_the_check(tmp_path: Path) -> None:
    # A temporary copy of the packages, with gRPC imported (inside a function) by every library
    # layer outside the wire layer, and the simulator by every service: each is reported.
    _copy_packages(tmp_path)
    planted = []
    for layer in LIBRARY:
        if layer in NETWORKED:
            continue
        planted.append((_plant(tmp_path, layer, "def planted():\n    import grpc.aio\n"),
                        "grpc.aio"))
    for folder, package in FOLDERS.items():
        if package in SERVICES:
            path = tmp_path / folder / package / "planted.py"
            path.write_text("def planted():\n    from fedhh.simulation import runner\n")
            planted.append((path.relative_to(tmp_path), "fedhh.simulation.runner"))
    found = upward_imports(tmp_path)
    assert len(found) == len(planted) == len(LIBRARY) - 2 + len(SERVICES)
    for path, module in planted:
        assert any(f.startswith(f"{path}:") and f.endswith(f" imports {module}") for f in found)


def cli_network_imports(root: Path) -> list[str]:
    """The CLI's imports of the network stack or a service at module level (the commands import
    them inside their functions, so `fedhh simulate` and every --help load neither)."""
    found = []
    for path in (root / "fedhh" / "cli").rglob("*.py"):
        for node in parsed(path).body:
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
                names = [node.module]
            else:
                continue
            found += [f"{path.relative_to(root)}:{node.lineno} imports {name}" for name in names
                      if _within(name, (*NETWORK, *SERVICES))]
    return found


def test_the_cli_imports_the_network_only_inside_its_commands(tmp_path: Path) -> None:
    assert cli_network_imports(ROOT) == []
    cli = tmp_path / "fedhh" / "cli"
    cli.mkdir(parents=True)
    (cli / "one.py").write_text("import os\n\n\ndef run():\n    import grpc\n")
    (cli / "two.py").write_text("from fedhh.rpc import serving\nimport fedhh_device.main\n")
    assert cli_network_imports(tmp_path) == ["fedhh/cli/two.py:1 imports fedhh.rpc",
                                             "fedhh/cli/two.py:2 imports fedhh_device.main"]


def test_the_folders_read_are_every_installed_package() -> None:
    # setuptools' packages.find, read as it reads it: the top-level packages under each of its
    # folders that its include patterns name.
    find = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"][
        "find"]
    installed = {(folder, child.name) for folder in find["where"]
                 for child in (ROOT / folder).iterdir()
                 if (child / "__init__.py").exists()
                 and any(fnmatch.fnmatch(child.name, pattern) for pattern in find["include"])}
    read = {("." if folder == "fedhh" else folder, package) for folder, package in FOLDERS.items()}
    assert installed == read
    assert set(SERVICES) == {package for package in FOLDERS.values() if package != "fedhh"}


def test_the_device_side_rules_match_whole_packages_only() -> None:
    # (before, a prefix of the name: ``fedhh.codecs`` passed as ``fedhh.codec``)
    assert _within("fedhh.codec.codes", DEVICE_ALLOWED)
    assert not _within("fedhh.codecs", DEVICE_ALLOWED)
    assert not _within("fedhh.errorsx", DEVICE_ALLOWED)
    assert _within("fedhh.rpc.serving", SERVER_FORBIDDEN)
    assert not _within("fedhh.rpcx", SERVER_FORBIDDEN)


# What the device process may not load: the server side of the library and of the services.
# (the ports' servers too: a device's client of a port imports the port's wire contract, as
# ``fedhh.rpc.framed.frames`` or ``fedhh.rpc.connect_wire``, never the port)
DEVICE_PROCESS_FORBIDDEN = ("fedhh.server", "fedhh.secagg.server", "fedhh.rounds",
                            "fedhh.privacy", "fedhh.pirappor", "fedhh.config", "fedhh.metrics",
                            "fedhh.rpc.connect", "fedhh.rpc.framed.server", "fedhh.rpc.procedures",
                            *OFFLINE, "fedhh_coordinator", "fedhh_aggregator")


def lazy_faces(root: Path) -> dict[str, str]:
    """``package.Name`` -> the submodule a lazy package face imports it from on first use
    (``fedhh.lazy``): the names its ``__init__`` imports under ``if TYPE_CHECKING:``."""
    found = {}
    for name, path in module_names(root).items():
        if path.name != "__init__.py":
            continue
        tree = parsed(path)
        inside = _type_checking_only(tree)
        for node in ast.walk(tree):
            if id(node) in inside and isinstance(node, ast.ImportFrom) and node.module:
                for alias in node.names:
                    found[f"{name}.{alias.asname or alias.name}"] = node.module
    return found


class RuntimeImports:
    """Module -> the project's modules a run of it imports, read on demand (a walk from a few
    modules parses only what it reaches): as :func:`import_graph`, without the type checker's
    imports, and a name taken from a lazy face (``from fedhh.secagg import SecAggServer``)
    leading to the submodule that defines it; with ``on_load``, those that loading it imports
    (not those inside its functions), and its package (loaded first)."""

    def __init__(self, root: Path, on_load: bool = False) -> None:
        self.names = module_names(root)
        self.lazy = lazy_faces(root)
        self.on_load = on_load

    def __call__(self, name: str) -> set[str]:
        found = set()
        parent = name.rpartition(".")[0]
        if self.on_load and parent in self.names:
            found.add(parent)
        for _, module in imports(self.names[name], name, runtime=True, on_load=self.on_load):
            module = self.lazy.get(module, module)
            while module and module not in self.names:
                module = module.rpartition(".")[0]
            if module and module != name:
                found.add(module)
        return found


def loaded_by(root: Path, module: str) -> set[str]:
    """The project's modules that importing ``module`` loads (itself included)."""
    edges = RuntimeImports(root, on_load=True)
    seen, work = {module}, [module]
    while work:
        for child in edges(work.pop()):
            if child not in seen:
                seen.add(child)
                work.append(child)
    return seen


def test_the_run_configuration_loads_the_server_vocabulary_only() -> None:
    # docs/architecture.md: fedhh.config reads the server's choices from
    # fedhh/server/vocabulary.py without loading the round logic (the face is lazy); the
    # pieces it validates are imported inside the checks that need them.
    loaded = loaded_by(ROOT, "fedhh.config")
    assert {m for m in loaded if _within(m, ("fedhh.server",))} == {
        "fedhh.server", "fedhh.server.vocabulary"}
    assert not any(_within(m, ("fedhh.privacy", "fedhh.pirappor", "fedhh.secagg", "fedhh.data",
                               "fedhh.device", "fedhh.codec")) for m in loaded)


def test_what_loading_a_module_loads_is_read_from_its_top_level(tmp_path: Path) -> None:
    write_tree(tmp_path, {
            "fedhh/one.py": "from fedhh.two import x\n\n\ndef f():\n    from fedhh import three\n",
            "fedhh/two.py": "x = 1\n",
            "fedhh/three.py": "",
            "fedhh/pkg/__init__.py": "",
            "fedhh/pkg/sub.py": ""})
    assert loaded_by(tmp_path, "fedhh.one") == {"fedhh.one", "fedhh.two"}
    assert loaded_by(tmp_path, "fedhh.pkg.sub") == {"fedhh.pkg.sub", "fedhh.pkg"}


def device_process_reaches(root: Path) -> list[str]:
    """Each forbidden module the device process's modules load, as the chain of imports that
    reaches it (at module level or inside functions, through any module in between, through
    lazy faces): ``forbidden <- ... <- fedhh_device.x``."""
    edges = RuntimeImports(root)
    reached: dict[str, str] = {}  # module -> the module that imported it first
    work = sorted(m for m in edges.names if _within(m, ("fedhh_device",)))
    seen = set(work)
    while work:
        module = work.pop()
        for child in sorted(edges(module)):
            if child not in seen:
                seen.add(child)
                reached[child] = module
                work.append(child)
    found = []
    for module in sorted(reached):
        if _within(module, DEVICE_PROCESS_FORBIDDEN):
            chain = [module]
            while chain[-1] in reached:
                chain.append(reached[chain[-1]])
            found.append(" <- ".join(chain))
    return found


def test_the_device_process_reaches_no_server_code() -> None:
    # (before, fedhh_device.report took RoundQuery from fedhh.server, so every device process
    # loaded the prefix tree, PruneHH, the estimates and the mechanisms; RoundQuery, what a
    # device receives, is now fedhh.device's; fedhh.secagg's face loaded SecAggServer, now
    # imported on first use; and the Connect client took the protocol's codes from the port's
    # module, loading the port and its procedures, now fedhh.rpc.connect_wire's)
    assert device_process_reaches(ROOT) == []


def test_a_planted_server_import_on_the_device_path_is_reported(tmp_path: Path) -> None:
    # Two hops away, inside a function: a device-side wire module the device process imports
    # reaching for the prefix tree (a tree of three modules, not a copy of the packages).
    write_tree(tmp_path, {"device/fedhh_device/main.py": "from fedhh.rpc import participation\n",
                          "fedhh/rpc/participation.py":
                              "def f():\n    from fedhh.server.prefixtree import PrefixTree\n",
                          "fedhh/server/prefixtree.py": "class PrefixTree:\n    pass\n"})
    assert device_process_reaches(tmp_path) == [
        "fedhh.server.prefixtree <- fedhh.rpc.participation <- fedhh_device.main"]


def test_a_server_name_taken_from_a_lazy_face_is_reported(tmp_path: Path) -> None:
    # The face's eager names are the device's to take; its lazy ones lead to their module,
    # and what only the type checker imports is not followed.
    write_tree(tmp_path, {
            "fedhh/secagg/__init__.py":
                "from typing import TYPE_CHECKING\n\nfrom fedhh.secagg.device import Stage\n\n"
                "if TYPE_CHECKING:\n    from fedhh.secagg.server import SecAggServer\n",
            "fedhh/secagg/device.py": "class Stage:\n    pass\n",
            "fedhh/secagg/server.py": "class SecAggServer:\n    pass\n",
            "device/fedhh_device/ok.py": "from fedhh.secagg import Stage\n",
            "device/fedhh_device/bad.py":
                "def f():\n    from fedhh.secagg import SecAggServer\n"})
    assert device_process_reaches(tmp_path) == ["fedhh.secagg.server <- fedhh_device.bad"]
    (tmp_path / "device/fedhh_device/bad.py").unlink()
    assert device_process_reaches(tmp_path) == []


# docs/architecture.md, "The network layer: one piece per rule": the network stack's
# constructors, each called in the one module that holds its rule, so that a second copy (a
# channel built beside serving.open_channel, a CA loaded beside tls.ca_certificates) fails here.
ONE_PIECE = {
    # gRPC channels and servers: the plaintext-on-loopback rule, the options and limits
    "grpc.aio.secure_channel": ("fedhh.rpc.serving",),
    "grpc.aio.insecure_channel": ("fedhh.rpc.serving",),
    "grpc.secure_channel": ("fedhh.rpc.serving",),
    "grpc.insecure_channel": ("fedhh.rpc.serving",),
    "grpc.aio.server": ("fedhh.rpc.serving",),
    "grpc.server": ("fedhh.rpc.serving",),
    # TLS material: files read to a bound, a CA that holds a certificate, TLS 1.2 or later
    "grpc.ssl_channel_credentials": ("fedhh.rpc.tls",),
    "grpc.ssl_server_credentials": ("fedhh.rpc.tls",),
    "ssl.create_default_context": ("fedhh.rpc.tls",),
    # (and `fedhh.cli.options.certificate_names`, which reads a served certificate's names,
    # unverified, to explain a host name mismatch: it trusts nothing it reads)
    "ssl.SSLContext": ("fedhh.rpc.tls", "fedhh.cli.options"),
    # the HTTP listeners' runner settings (Connect ports, dashboard, metrics)
    "aiohttp.web.AppRunner": ("fedhh.rpc.http_listener",),
    # the Connect client's HTTP sessions: plaintext to loopback only, the CA's context
    "aiohttp.ClientSession": ("fedhh.rpc.connect_client",),
    "aiohttp.TCPConnector": ("fedhh.rpc.connect_client",),
    # a service process's start (serving.run_service): uvloop, the cycle collector run seldom,
    # the soft open-file limit raised (an event loop run elsewhere would miss all three)
    "asyncio.run": ("fedhh.rpc.serving",),
    "asyncio.set_event_loop_policy": ("fedhh.rpc.serving",),
    "gc.freeze": ("fedhh.rpc.serving",),
    "gc.set_threshold": ("fedhh.rpc.serving",),
    "resource.setrlimit": ("fedhh.rpc.http_listener",),
    # a call's credential check refused alike on every port (serving.credential_refusal: a
    # domain error's status and one bounded line, anything else INTERNAL and logged); before,
    # each port ran the check and called this itself, and gRPC's gate drifted from the others
    "fedhh.rpc.serving.check_failure_status": ("fedhh.rpc.serving",),
}


def local_names(path: Path, name: str) -> dict[str, str]:
    """What each name the module ``name`` (at ``path``) imports stands for, dotted: ``import
    grpc.aio`` binds ``grpc``, ``from grpc import aio as a`` binds ``a`` to ``grpc.aio``,
    relative imports resolved against the module's package."""
    package = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
    found: dict[str, str] = {}
    for node in walked(path):
        if isinstance(node, ast.Import):
            for alias in node.names:
                first = alias.name.split(".")[0]
                found[alias.asname or first] = alias.name if alias.asname else first
        elif isinstance(node, ast.ImportFrom):
            module = node.module or ""
            if node.level:
                module = ".".join([*package[:len(package) - node.level + 1],
                                   *([module] if module else [])])
            for alias in node.names:
                found[alias.asname or alias.name] = f"{module}.{alias.name}"
    return found


def _dotted(node: ast.AST, aliases: dict[str, str]) -> str | None:
    """``node`` (a name or an attribute chain) as the dotted name it stands for, through the
    module's imports (``from grpc import aio`` makes ``aio.server`` ``grpc.aio.server``)."""
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name) or node.id not in aliases:
        return None
    return ".".join([aliases[node.id], *reversed(parts)])


def constructor_calls(root: Path) -> list[str]:
    """Each call of a ``ONE_PIECE`` constructor (or one passed to a call, as to
    ``functools.partial``) outside the module that holds it, in the layers that may use the
    network stack (``NETWORKED``: no other imports it)."""
    found = []
    for name, path in module_names(root).items():
        if layer_of(name) not in NETWORKED:
            continue
        aliases = local_names(path, name)
        for node in walked(path):
            if not isinstance(node, ast.Call):
                continue
            for used in (node.func, *node.args):
                dotted = _dotted(used, aliases)
                if dotted in ONE_PIECE and name not in ONE_PIECE[dotted]:
                    found.append(f"{path.relative_to(root)}:{node.lineno} calls {dotted}")
    return found


# Methods whose names say what they do whatever object they are called on, each called only
# where its rule lives: a gRPC port bound (the plaintext-on-loopback rule, serving.bind), the
# stop on SIGTERM or SIGINT (serving.stop_event; the task census' own signal), a certificate
# and key loaded (tls), a CA trusted (tls.ca_certificates: read to a bound, refused when it
# holds no certificate), a raw connection dialed (the framed client; a certificate's names read
# unverified by the CLI, as ONE_PIECE's ssl.SSLContext says), a socket listened on and its
# connections accepted (http_listener.Listener: the connection cap, the head deadline, the
# fairness of every HTTP and framed port); asyncio's own servers and dials, nowhere.
METHOD_PIECE: dict[str, tuple[str, ...]] = {
    "add_insecure_port": ("fedhh.rpc.serving",),
    "add_secure_port": ("fedhh.rpc.serving",),
    "add_signal_handler": ("fedhh.rpc.serving", "fedhh.rpc.task_census"),
    "load_cert_chain": ("fedhh.rpc.tls",),
    "load_verify_locations": ("fedhh.rpc.tls",),
    "load_default_certs": ("fedhh.rpc.tls",),
    "set_default_verify_paths": ("fedhh.rpc.tls",),
    "create_connection": ("fedhh.rpc.framed.client", "fedhh.cli.options"),
    "listen": ("fedhh.rpc.http_listener",),
    "sock_accept": ("fedhh.rpc.http_listener",),
    **{method: () for method in ("create_server", "start_server", "create_unix_server",
                                 "start_unix_server", "open_connection", "sock_connect",
                                 "create_unix_connection", "open_unix_connection")},
}


def method_calls(root: Path) -> list[str]:
    """Each call of a ``METHOD_PIECE`` method outside the modules that hold it, in the layers
    that may use the network stack."""
    return [f"{path.relative_to(root)}:{node.lineno} calls .{node.func.attr}"
            for name, path in module_names(root).items() if layer_of(name) in NETWORKED
            for node in walked(path)
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
            and node.func.attr in METHOD_PIECE and name not in METHOD_PIECE[node.func.attr]]


def test_ports_signals_and_certificates_are_handled_in_their_one_piece(tmp_path: Path) -> None:
    # (before, the device process installed its own SIGTERM/SIGINT handlers beside
    # serving.wait_for_signal's)
    assert method_calls(ROOT) == []
    write_tree(tmp_path, {
            "fedhh/rpc/serving.py": "def bind(server):\n    server.add_insecure_port('x')\n",
            "device/fedhh_device/main.py":
                "def serve(loop, stop):\n    loop.add_signal_handler(15, stop.set)\n",
            "fedhh/simulation/runner.py":  # (offline code: none of the network layer's rules)
                "def run(loop, stop):\n    loop.add_signal_handler(15, stop.set)\n",
            # a port of its own beside the listener's, a CA beside tls's, a dial beside the
            # framed client's
            "server/fedhh_coordinator/hub.py":
                "import asyncio\n\n\nasync def f(sock, context, handle):\n"
                "    sock.listen(8)\n    context.load_verify_locations('ca.pem')\n"
                "    await asyncio.start_server(handle, '0.0.0.0', 7000)\n"
                "    await asyncio.open_connection('10.0.0.1', 7000)\n",
            "fedhh/rpc/http_listener.py": "def bind(sock):\n    sock.listen(8)\n"})
    assert sorted(method_calls(tmp_path)) == [
        "device/fedhh_device/main.py:2 calls .add_signal_handler",
        "server/fedhh_coordinator/hub.py:5 calls .listen",
        "server/fedhh_coordinator/hub.py:6 calls .load_verify_locations",
        "server/fedhh_coordinator/hub.py:7 calls .start_server",
        "server/fedhh_coordinator/hub.py:8 calls .open_connection"]


def test_the_network_stacks_constructors_are_called_in_their_one_piece() -> None:
    # (before: the device process built its gRPC channels with a copy of open_channel, and
    # the framed and Connect clients each loaded their CA with ssl.create_default_context)
    assert constructor_calls(ROOT) == []


def test_a_constructor_called_outside_its_piece_is_reported(tmp_path: Path) -> None:
    write_tree(tmp_path, {
            "fedhh/rpc/serving.py": "import grpc\n\n\ndef f():\n    return grpc.aio.server()\n",
            "fedhh/rpc/tls.py": "import ssl\n\nX: ssl.SSLContext | None = None\n",
            "fedhh/rpc/connect_client.py":
                "import ssl as s\n\n\ndef f():\n    return s.create_default_context()\n",
            "device/fedhh_device/main.py":
                "import functools\nfrom grpc import aio\n\n\ndef f():\n"
                "    return functools.partial(aio.insecure_channel, 'x')\n",
            # a service's own event loop, beside serving.run_service (the simulator's is not
            # the network layer's: allowed)
            "server/fedhh_coordinator/main.py": "import asyncio\n\n\ndef run(x):\n"
                                                "    return asyncio.run(x)\n",
            "fedhh/simulation/runner.py": "import asyncio\n\n\ndef run(x):\n"
                                          "    return asyncio.run(x)\n",
            # a port that runs a call's credential check and words its refusal itself
            "fedhh/rpc/framed/server.py":
                "from fedhh.errors import FedhhError\nfrom fedhh.rpc import serving\n\n\n"
                "def opened(route, metadata, end):\n    try:\n        route.check(metadata)\n"
                "    except FedhhError as error:\n"
                "        end(serving.check_failure_status(error), str(error))\n"})
    assert sorted(constructor_calls(tmp_path)) == [
        "device/fedhh_device/main.py:6 calls grpc.aio.insecure_channel",
        "fedhh/rpc/connect_client.py:5 calls ssl.create_default_context",
        "fedhh/rpc/framed/server.py:9 calls fedhh.rpc.serving.check_failure_status",
        "server/fedhh_coordinator/main.py:5 calls asyncio.run"]


def one_piece_table(text: str) -> list[list[str]]:
    """The names each row of docs/architecture.md's "The network layer: one piece per rule"
    table gives as its one piece, in its second column's backquotes, ``@`` dropped."""
    section = text.split("## The network layer: one piece per rule", 1)[1].split("\n## ", 1)[0]
    rows = [line.split(" | ", 1)[1] for line in section.splitlines()
            if line.startswith("| ") and " | " in line and not line.startswith("| rule ")
            and not line.startswith("| ---")]
    return [[name.lstrip("@") for name in row.split("`")[1::2]] for row in rows]


def unresolved_pieces(root: Path, text: str) -> list[str]:
    """The table's names that no module defines at its top level: ``serving.bind`` is
    ``fedhh.rpc.serving``'s, a full dotted name its module's, a bare name its row's previous
    module's."""
    names = module_names(root)
    missing = []
    for row in one_piece_table(text):
        module = ""
        for name in row:
            dotted = name if "." in name else f"{module}.{name}"
            if not any(dotted.startswith(m + ".") for m in names):
                dotted = f"fedhh.rpc.{dotted}"
            module, _, attribute = dotted.rpartition(".")
            defined = set()
            if module in names:
                for node in parsed(names[module]).body:
                    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                        defined.add(node.name)
                    elif isinstance(node, (ast.Assign, ast.AnnAssign)):
                        targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                        defined.update(t.id for t in targets if isinstance(t, ast.Name))
            if attribute not in defined:
                missing.append(name)
    return missing


def test_the_one_piece_tables_names_are_defined_where_it_says() -> None:
    # docs/architecture.md's table names, for each rule of the network layer, the one piece
    # that holds it; a piece renamed or moved would leave the table pointing at nothing.
    text = (ROOT / "docs" / "architecture.md").read_text()
    rows = one_piece_table(text)
    assert len(rows) >= 12 and all(rows), rows
    assert unresolved_pieces(ROOT, text) == []


def test_a_piece_the_code_does_not_define_is_reported(tmp_path: Path) -> None:
    write_tree(tmp_path, {"fedhh/rpc/serving.py": "X = 1\n\n\ndef bind():\n    pass\n",
                          "server/fedhh_coordinator/auth.py": "class Gate:\n    pass\n"})
    text = ("## The network layer: one piece per rule\n\n| rule | the one piece |\n"
            "| --- | --- |\n| a | `serving.bind`, `X` and `Y` |\n"
            "| b | `fedhh_coordinator.auth.Gate`, `@serving.gone` |\n\n## Next\n| c | `z` |\n")
    assert one_piece_table(text) == [["serving.bind", "X", "Y"],
                                     ["fedhh_coordinator.auth.Gate", "serving.gone"]]
    assert unresolved_pieces(tmp_path, text) == ["Y", "serving.gone"]


def calls_in(path: Path, function: str) -> set[str]:
    """The names ``function`` (a top-level function or a method of ``path``) calls: a plain
    name, or an attribute's last part (``rr.randomize(...)``: ``randomize``)."""
    found: set[str] = set()
    for node in walked(path):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name == function:
            for call in ast.walk(node):
                if isinstance(call, ast.Call):
                    if isinstance(call.func, ast.Name):
                        found.add(call.func.id)
                    elif isinstance(call.func, ast.Attribute):
                        found.add(call.func.attr)
    return found


def bearer_readers(root: Path) -> list[str]:
    """The modules of the network layers, but ``fedhh.rpc.credentials``, that name a call's
    ``authorization`` metadata (a string constant, any case): each would read or write a
    bearer token beside the one piece (``credentials.bearer``, ``check_bearer``,
    ``bearer_metadata``), without its 512-character bound or its constant-time compare."""
    return sorted(name for name, path in module_names(root).items()
                  if layer_of(name) in NETWORKED and name != "fedhh.rpc.credentials"
                  and any(isinstance(node, ast.Constant) and isinstance(node.value, str)
                          and node.value.lower() == "authorization" for node in walked(path)))


def test_a_calls_bearer_token_is_read_in_its_one_piece(tmp_path: Path) -> None:
    # docs/architecture.md, the one-piece table's ``credentials.bearer``
    assert bearer_readers(ROOT) == []
    write_tree(tmp_path, {
        "fedhh/rpc/credentials.py": "KEY = 'authorization'\n",
        "aggregator/fedhh_aggregator/auth.py":
            "def token(metadata):\n    return dict(metadata).get('Authorization')\n",
        "fedhh/simulation/runner.py": "KEY = 'authorization'\n"})  # (offline: not the wire's)
    assert bearer_readers(tmp_path) == ["fedhh_aggregator.auth"]


# docs/architecture.md, the one-piece table's ``@status_errors``: every gRPC method a service
# serves (a method named in CamelCase, as the proto names them; Python's are snake_case) ends
# on an error through the one mapping, a domain error with its code and its message on one
# bounded line, any other INTERNAL and logged.
def unmapped_methods(root: Path) -> list[str]:
    """Each service method named in CamelCase that ``status_errors`` does not wrap."""
    found = []
    for name, path in module_names(root).items():
        if layer_of(name) not in SERVICES:
            continue
        for node in walked(path):
            if not isinstance(node, ast.ClassDef):
                continue
            for method in node.body:
                if (isinstance(method, (ast.FunctionDef, ast.AsyncFunctionDef))
                        and method.name[:1].isupper()
                        and not any(ast.unparse(d).split(".")[-1] == "status_errors"
                                    for d in method.decorator_list)):
                    found.append(f"{path.relative_to(root)}:{method.lineno} "
                                 f"{node.name}.{method.name}")
    return found


def test_every_service_method_maps_its_errors_in_the_one_piece(tmp_path: Path) -> None:
    # (before, the leader's selector stream, SelectorHub.Attach, aborted with codes of its own,
    # and a failure of its reader other than a bad batch ended the stream OK, unlogged)
    assert unmapped_methods(ROOT) == []
    write_tree(tmp_path, {
            "server/fedhh_coordinator/hub.py":
                "from fedhh.rpc import errors\nfrom fedhh.rpc.errors import status_errors\n\n\n"
                "class Hub:\n    async def Attach(self, it, context):\n        pass\n\n"
                "    @status_errors\n    async def Get(self, request, context):\n        pass\n\n"
                "    @errors.status_errors\n    async def Put(self, request, context):\n"
                "        pass\n\n    def apply(self, batch):\n        pass\n",
            "fedhh/rpc/health.py":  # (grpc's own services, answered in their own codes)
                "class Health:\n    async def Check(self, request, context):\n        pass\n"})
    assert unmapped_methods(tmp_path) == ["server/fedhh_coordinator/hub.py:6 Hub.Attach"]


# docs/architecture.md, the one-piece table's ``tls.ca_certificates``: a client trusts its CA
# file, and checks the peer's name. A check turned off (CERT_NONE or CERT_OPTIONAL, the host
# name not checked, an unverified context) only where the CLI reads a served certificate's
# names to explain a mismatch (``fedhh.cli.options.certificate_names``: nothing is sent, and it
# trusts nothing it reads); the name gRPC checks replaced only by ``serving.command_channel``'s
# ``tls_name`` (a command that dials an address its certificate does not name).
UNVERIFYING = {f"ssl.{name}": ("fedhh.cli.options",)
               for name in ("CERT_NONE", "CERT_OPTIONAL", "VerifyMode.CERT_NONE",
                            "VerifyMode.CERT_OPTIONAL", "_create_unverified_context",
                            "_create_stdlib_context")}
NAME_OVERRIDE = "grpc.ssl_target_name_override"


def unverified_tls(root: Path) -> list[str]:
    """Each place of the network layers, outside the one that may, that turns a TLS peer's
    check off or replaces the name it is checked against (``UNVERIFYING``, ``check_hostname``
    set false, ``NAME_OVERRIDE``)."""
    found = []
    for name, path in module_names(root).items():
        if layer_of(name) not in NETWORKED:
            continue
        aliases = local_names(path, name)
        where = path.relative_to(root)
        for node in walked(path):
            dotted = _dotted(node, aliases) if isinstance(node, (ast.Attribute, ast.Name)) \
                else None
            if dotted in UNVERIFYING and name not in UNVERIFYING[dotted]:
                found.append(f"{where}:{node.lineno} uses {dotted}")
            elif (isinstance(node, ast.Assign) and name != "fedhh.cli.options"
                  and any(isinstance(t, ast.Attribute) and t.attr == "check_hostname"
                          for t in node.targets)
                  and not (isinstance(node.value, ast.Constant) and node.value.value is True)):
                found.append(f"{where}:{node.lineno} sets check_hostname")
            elif (isinstance(node, ast.Constant) and node.value == NAME_OVERRIDE
                  and name != "fedhh.rpc.serving"):
                found.append(f"{where}:{node.lineno} names {NAME_OVERRIDE}")
    return found


def test_a_tls_peer_is_checked_but_where_the_one_piece_says(tmp_path: Path) -> None:
    assert unverified_tls(ROOT) == []
    write_tree(tmp_path, {
            "fedhh/cli/options.py": "import ssl\n\n\ndef names(context):\n"
                                    "    context.check_hostname = False\n"
                                    "    context.verify_mode = ssl.CERT_NONE\n",
            "fedhh/rpc/connect_client.py":
                "import ssl\nfrom ssl import CERT_NONE\n\n\ndef f(context, on):\n"
                "    context.check_hostname = on\n    context.verify_mode = CERT_NONE\n"
                "    return ssl._create_unverified_context()\n",
            "device/fedhh_device/main.py":
                "OPTIONS = [('grpc.ssl_target_name_override', 'x')]\n",
            "fedhh/rpc/serving.py": "OVERRIDE = 'grpc.ssl_target_name_override'\n",
            "fedhh/simulation/runner.py":  # (offline code: none of the network layer's rules)
                "import ssl\n\nMODE = ssl.CERT_NONE\n"})
    assert sorted(unverified_tls(tmp_path)) == [
        "device/fedhh_device/main.py:1 names grpc.ssl_target_name_override",
        "fedhh/rpc/connect_client.py:6 sets check_hostname",
        "fedhh/rpc/connect_client.py:7 uses ssl.CERT_NONE",
        "fedhh/rpc/connect_client.py:8 uses ssl._create_unverified_context"]


# docs/architecture.md, the one-piece table's ``serving.listener_context``: a listener's TLS
# context (a service's certificate, or plaintext where asked for on loopback) is decided there.
# Before, the metrics endpoint and ``fedhh up``'s demo page each made theirs.
LISTENER_CONTEXT = "fedhh.rpc.serving"


def found_outside(root: Path, piece: str, found: Callable[[ast.AST], bool], what: str
                  ) -> list[str]:
    """``PATH:LINE what`` for each node ``found`` picks in a module other than ``piece``."""
    return [f"{path.relative_to(root)}:{node.lineno} {what}"
            for name, path in module_names(root).items() if name != piece
            for node in walked(path) if found(node)]


def own_listener_contexts(root: Path) -> list[str]:
    """Each call of a ``server_context`` outside ``LISTENER_CONTEXT``."""
    return found_outside(root, LISTENER_CONTEXT, lambda node: isinstance(node, ast.Call)
                         and isinstance(node.func, ast.Attribute)
                         and node.func.attr == "server_context",
                         "makes a listener's TLS context")


def test_a_listeners_tls_context_is_decided_in_the_one_piece(tmp_path: Path) -> None:
    assert own_listener_contexts(ROOT) == []
    write_tree(tmp_path, {
        "fedhh/rpc/observability.py":
            "def start(tls):\n    return tls.server_context('x') if tls else None\n",
        "fedhh/rpc/serving.py":
            "def listener_context(tls, what):\n    return tls.server_context(what)\n"})
    assert own_listener_contexts(tmp_path) == [
        "fedhh/rpc/observability.py:2 makes a listener's TLS context"]


# Which answers a caller tries again, or takes as final, is a named set of status codes
# (``participation.RETRIED_CODES``, ``serving.COMMAND_RETRIED``, ...), so that one rule has one
# name to be found by: before, ``fedhh admin wait`` and ``fedhh health --wait`` each wrote the
# pair they wait past inline, and the devices' enrolment retries kept a set of their own that
# left out CANCELLED, which every other device call retries.
def inline_code_sets(root: Path) -> list[str]:
    """Each ``x in (StatusCode.A, StatusCode.B, ...)`` (a tuple, set or list written inline)."""
    found = []
    for name, path in module_names(root).items():
        if layer_of(name) not in NETWORKED:
            continue
        for node in walked(path):
            if not isinstance(node, ast.Compare):
                continue
            for op, right in zip(node.ops, node.comparators, strict=True):
                if isinstance(op, (ast.In, ast.NotIn)) \
                        and isinstance(right, (ast.Tuple, ast.Set, ast.List)) \
                        and sum("StatusCode." in ast.unparse(e) for e in right.elts) >= 2:
                    found.append(f"{path.relative_to(root)}:{node.lineno} classifies status "
                                 "codes inline")
    return found


def test_status_codes_are_classified_by_named_sets(tmp_path: Path) -> None:
    assert inline_code_sets(ROOT) == []
    write_tree(tmp_path, {
        "fedhh/rpc/admin_client.py":
            "import grpc\n\n\ndef again(e):\n    return e.code() not in (\n"
            "        grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED)\n",
        "fedhh/rpc/serving.py":
            "import grpc\n\nRETRIED = frozenset({grpc.StatusCode.UNAVAILABLE,\n"
            "                     grpc.StatusCode.DEADLINE_EXCEEDED})\n\n\n"
            "def again(e):\n    return e.code() in RETRIED or e.code() in (1, 2)\n"})
    assert inline_code_sets(tmp_path) == [
        "fedhh/rpc/admin_client.py:5 classifies status codes inline"]


# A stage's deadline in seconds is ``StageDeadlines.at_s``: before, the devices and the
# aggregator each divided ``deadlines.of(stage)`` by 1000 in a function of their own, and the
# aggregator's stage closes twice more inline.
DEADLINES_MODULE = "fedhh.secagg.config"


def own_deadline_conversions(root: Path) -> list[str]:
    """Each ``....of(...) / 1000`` outside ``DEADLINES_MODULE``."""
    return found_outside(root, DEADLINES_MODULE, lambda node: isinstance(node, ast.BinOp)
                         and isinstance(node.op, ast.Div) and isinstance(node.left, ast.Call)
                         and isinstance(node.left.func, ast.Attribute)
                         and node.left.func.attr == "of"
                         and isinstance(node.right, ast.Constant)
                         and node.right.value == 1000,
                         "converts a stage's deadline itself")


def test_a_stages_deadline_in_seconds_is_read_in_one_piece(tmp_path: Path) -> None:
    assert own_deadline_conversions(ROOT) == []
    write_tree(tmp_path, {
        "aggregator/fedhh_aggregator/rounds.py":
            "import time\n\n\ndef left(config, stage):\n"
            "    return config.deadlines.of(stage) / 1000 - time.time()\n",
        "fedhh/secagg/config.py":
            "class StageDeadlines:\n    def at_s(self, stage):\n"
            "        return self.of(stage) / 1000\n"})
    assert own_deadline_conversions(tmp_path) == [
        "aggregator/fedhh_aggregator/rounds.py:5 converts a stage's deadline itself"]


# docs/architecture.md, the one-piece table's ``serving.check_start``: each process that
# listens or writes a ready file refuses its TLS files, ready file and listeners there, in the
# function that checks its start.
STARTS = {
    "server/fedhh_coordinator/main.py": "check_startup",
    "server/fedhh_coordinator/selector_main.py": "check_startup",
    "aggregator/fedhh_aggregator/main.py": "from_args",
    "aggregator/fedhh_aggregator/combiner_main.py": "from_args",
    "fedhh/cli/device.py": "run",
}


def unchecked_starts(root: Path) -> list[str]:
    """The ``STARTS`` whose start function does not call ``check_start``."""
    return [path for path, function in STARTS.items()
            if "check_start" not in calls_in(root / path, function)]


def test_every_process_checks_its_start_in_the_one_piece(tmp_path: Path) -> None:
    # (before, the device process checked neither its --ready-file nor its metrics listener:
    # an unwritable ready file failed it once every device had enrolled)
    assert unchecked_starts(ROOT) == []
    write_tree(tmp_path, {path: (ROOT / path).read_text() for path in STARTS})
    (tmp_path / "fedhh/cli/device.py").write_text("def run(args):\n    return start(args)\n")
    assert unchecked_starts(tmp_path) == ["fedhh/cli/device.py"]


def test_the_simulator_draws_a_report_through_the_devices_own_functions() -> None:
    # docs/architecture.md: a networked run reproduces the per-device simulation because both
    # draw a device's report with the same functions of fedhh.device, from the same stream:
    # the item (select_domain_index), then the randomizer (RandomizedResponse.randomize).
    # Before, the simulator and fedhh_device.report each kept a copy of the draw's lines
    # around select_block.
    device = ROOT / "device" / "fedhh_device" / "report.py"
    simulator = ROOT / "fedhh" / "simulation" / "rounds.py"
    assert {"select_domain_index", "randomize"} <= calls_in(device, "make_report")
    assert "select_domain_index" in calls_in(simulator, "device_domain_index")
    assert {"device_domain_index", "randomize"} <= calls_in(simulator, "_per_device")
    for path, function in ((device, "make_report"), (simulator, "device_domain_index")):
        assert "select_block" not in calls_in(path, function), f"{path.name}: a copy of the draw"


def private_reaches(root: Path) -> list[str]:
    """Each use of another layer's (or service's) private name (one leading underscore): an
    import of it (``from fedhh.secagg.server import _x``) or an attribute of an imported
    module (``serving._guard``). A package's internals are its own; the services and the wire
    layer use the core through its public names."""
    names = module_names(root)
    found = []
    for name, path in names.items():
        # a local name -> the project's module it is
        modules = {local: dotted for local, dotted in local_names(path, name).items()
                   if dotted in names}
        for line, dotted in imports(path, name):
            module, _, imported = dotted.rpartition(".")
            if (dotted not in names and imported.startswith("_")
                    and not imported.startswith("__") and layer_of(module) != layer_of(name)):
                found.append(f"{path.relative_to(root)}:{line} imports {dotted}")
        for node in walked(path):
            if (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name)
                    and node.value.id in modules and node.attr.startswith("_")
                    and not node.attr.startswith("__")
                    and layer_of(modules[node.value.id]) != layer_of(name)):
                found.append(f"{path.relative_to(root)}:{node.lineno} uses "
                             f"{modules[node.value.id]}.{node.attr}")
    return found


def test_no_layer_reaches_for_another_layers_private_names() -> None:
    assert private_reaches(ROOT) == []


def test_a_private_reach_is_reported(tmp_path: Path) -> None:
    write_tree(tmp_path, {
            "fedhh/rpc/serving.py": "def _guard():\n    pass\n\n\ndef guard():\n    _guard()\n",
            "fedhh/rpc/connect.py": "from fedhh.rpc.serving import _guard\n",  # (one layer)
            "server/fedhh_coordinator/main.py":
                "from fedhh.rpc import serving\nfrom fedhh.rpc.serving import _guard, guard\n\n\n"
                "def f():\n    return serving._guard, serving.guard, guard, _guard\n"})
    assert sorted(private_reaches(tmp_path)) == [
        "server/fedhh_coordinator/main.py:2 imports fedhh.rpc.serving._guard",
        "server/fedhh_coordinator/main.py:6 uses fedhh.rpc.serving._guard"]


# The protocol's pure core: the SecAgg+ state machines, what a device computes, the codes, what
# follows from a round's sum, the accounting. The transports (fedhh.rpc, the services) and
# the drivers (fedhh.rounds, the simulator) run them; they themselves run no event loop,
# thread, process or socket (fedhh/secagg/__init__.py: "no network stack and no event loop").
PURE_CORE = ("fedhh.secagg", "fedhh.device", "fedhh.codec", "fedhh.server", "fedhh.privacy")
RUNTIME = ("asyncio", "socket", "ssl", "selectors", "threading", "concurrent",
           "multiprocessing", "http", "urllib")


def impure_core_imports(root: Path) -> list[str]:
    return [f"{path.relative_to(root)}:{line} imports {module}"
            for name, path in module_names(root).items() if _within(name, PURE_CORE)
            for line, module in imports(path, name) if _within(module, RUNTIME)]


def test_the_protocol_core_runs_no_event_loop_thread_or_socket(tmp_path: Path) -> None:
    assert impure_core_imports(ROOT) == []
    write_tree(tmp_path, {"fedhh/secagg/server.py": "def f():\n    import asyncio\n",
                          "fedhh/device/streams.py": "from concurrent.futures import Future\n",
                          "fedhh/rounds.py": "import asyncio\n"})  # (a driver: allowed)
    assert sorted(impure_core_imports(tmp_path)) == [
        "fedhh/device/streams.py:1 imports concurrent.futures.Future",
        "fedhh/secagg/server.py:2 imports asyncio"]


def drawn_layers(text: str) -> list[str]:
    """The library layers docs/architecture.md's drawing ("## The layers") names at the start
    of its rows, lowest first (a row drawn higher is a layer above; within a row, left is
    higher), the CLI's box left out."""
    drawing = text.split("## The layers", 1)[1].split("```", 2)[1]
    rows = [re.match(r"\s*\| (fedhh\.\w+(?:, fedhh\.\w+)*)", line)
            for line in drawing.splitlines()]
    names = [name for row in rows if row for name in row.group(1).split(", ")]
    return [name for name in reversed(names) if name != "fedhh.cli"]


def test_the_drawing_of_the_layers_is_the_checked_order() -> None:
    # The doc says the test holds its drawing's order in LIBRARY; before, the drawing had
    # no box for fedhh.lazy, fedhh.input_files or fedhh.output_paths, which LIBRARY orders.
    assert drawn_layers((ROOT / "docs" / "architecture.md").read_text()) == list(LIBRARY)
    text = ("## The layers\n\n```\n   | fedhh.cli     the CLI |\n   | fedhh.plot, fedhh.rpc x |\n"
            "   |             above fedhh.codec |\n   | fedhh.codec   codes |\n```\n| fedhh.v1 |\n")
    assert drawn_layers(text) == ["fedhh.codec", "fedhh.rpc", "fedhh.plot"]


# Packages docs/architecture.md says the privacy face loads none of until a name is used (a
# second of every start that reads a run's budget but never solves one).
PRIVACY_FACE_DEFERS = ("scipy", "dp_accounting")


def loads_of(root: Path, module: str, packages: tuple[str, ...]) -> list[str]:
    """Each import of ``packages`` that loading ``module`` makes, through the project's modules
    it loads (at module level, through lazy faces' eager names)."""
    names = module_names(root)
    return [f"{names[m].relative_to(root)}:{line} imports {imported}"
            for m in sorted(loaded_by(root, module))
            for line, imported in imports(names[m], m, runtime=True, on_load=True)
            if _within(imported, packages)]


def test_the_privacy_face_loads_neither_scipy_nor_dp_accounting(tmp_path: Path) -> None:
    assert "fedhh.privacy" in loaded_by(ROOT, "fedhh.privacy")
    assert loads_of(ROOT, "fedhh.privacy", PRIVACY_FACE_DEFERS) == []
    write_tree(tmp_path, {
            "fedhh/privacy/__init__.py": "from fedhh.privacy.ledger import Ledger\n",
            "fedhh/privacy/ledger.py": "from fedhh.privacy import solver\n\n\nclass Ledger:\n"
                                       "    pass\n",
            "fedhh/privacy/solver.py": "from scipy.special import ndtr\n\n\ndef f():\n"
                                       "    import dp_accounting\n"})
    assert loads_of(tmp_path, "fedhh.privacy", PRIVACY_FACE_DEFERS) == [
        "fedhh/privacy/solver.py:1 imports scipy.special.ndtr"]


# docs/architecture.md, the one-piece table's ``backoff.Backoff``: a retry loop's pauses are
# drawn from it (full jitter), not doubled by hand beside a sleep, where no jitter was drawn and
# each loop had its own caps. Before, five service loops doubled their own pause. And a value
# doubled up to a cap (``min(2 * x, cap)``, ``min(cap, base * 2 ** n)``) is a pause's growth
# wherever it is: the stores' fail-at-once windows (``backoff.Holdoff``), the devices'
# enrolment retries, whose pause a method of their own slept, and their pause after a GetTask
# that brought nothing (``backoff.ceiling``) each doubled theirs so.
BACKOFF = "fedhh.backoff"


def _doubles(node: ast.AST) -> bool:
    """``x *= 2``, or an assignment whose value multiplies by 2 (``min(2 * delay, CAP)``)."""
    if isinstance(node, ast.AugAssign):
        return isinstance(node.op, ast.Mult) and isinstance(node.value, ast.Constant) \
            and node.value.value == 2
    if not isinstance(node, ast.Assign):
        return False
    return any(isinstance(n, ast.BinOp) and isinstance(n.op, ast.Mult)
               and any(isinstance(side, ast.Constant) and side.value == 2
                       for side in (n.left, n.right))
               for n in ast.walk(node.value))


def _powers_of_two(node: ast.AST) -> bool:
    """``2 ** n`` (or ``2.0 ** n``) within ``node``, ``n`` a variable (``2.0 ** -53`` is a
    constant)."""
    return any(isinstance(n, ast.BinOp) and isinstance(n.op, ast.Pow)
               and isinstance(n.left, ast.Constant) and n.left.value == 2
               and any(isinstance(m, ast.Name) for m in ast.walk(n.right))
               for n in ast.walk(node))


def _capped_doubling(node: ast.AST) -> bool:
    """``min(2 * x, cap)`` or ``min(cap, base * 2 ** n)`` (either side, any argument)."""
    return isinstance(node, ast.Call) and isinstance(node.func, ast.Name) \
        and node.func.id == "min" and any(
            _doubles(ast.Assign(targets=[], value=arg)) or _powers_of_two(arg)
            for arg in node.args)


def hand_written_backoffs(root: Path) -> list[str]:
    """Each function, outside ``BACKOFF``, that sleeps and doubles a value, or doubles one up to
    a cap: a retry loop's pause, or a fail-at-once window, written by hand."""
    found = []
    for name, path in module_names(root).items():
        if name == BACKOFF:
            continue
        for node in walked(path):
            if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            inner = list(ast.walk(node))
            capped = [n.lineno for n in inner if _capped_doubling(n)]
            if capped:
                found.append(f"{path.relative_to(root)}:{capped[0]} doubles a pause to a cap by "
                             f"hand in {node.name}")
                continue
            sleeps = any(isinstance(n, ast.Call) and (
                (isinstance(n.func, ast.Attribute) and n.func.attr == "sleep")
                or (isinstance(n.func, ast.Name) and n.func.id == "sleep")) for n in inner)
            doubled = [n.lineno for n in inner if _doubles(n)]
            if sleeps and doubled:
                found.append(f"{path.relative_to(root)}:{doubled[0]} doubles a pause by hand "
                             f"in {node.name}")
    return found


def test_every_retry_pause_is_drawn_from_the_one_backoff(tmp_path: Path) -> None:
    assert hand_written_backoffs(ROOT) == []
    write_tree(tmp_path, {
        "server/fedhh_coordinator/poll.py":
            "import asyncio\n\n\nasync def poll(f):\n    delay = 0.1\n    while not f():\n"
            "        await asyncio.sleep(delay)\n        delay = min(delay * 2, 5.0)\n",
        "aggregator/fedhh_aggregator/wait.py":
            "import time\n\n\ndef wait(f, d=1.0):\n    while not f():\n        time.sleep(d)\n"
            "        d *= 2\n",
        "server/fedhh_coordinator/db/store.py":
            "class Store:\n    def failed(self, now):\n        self.pause_s = "
            "min(self.pause_s * 2, 30.0) if self.pause_s else 1.0\n"
            "        self.until = now + self.pause_s\n",
        "device/fedhh_device/calls.py":
            "async def retry(call, pause):\n    p = 0.2\n    while True:\n"
            "        try:\n            return await call()\n        except OSError:\n"
            "            await pause(p)\n            p = min(2 * p, 10.0)\n",
        "device/fedhh_device/polls.py":
            "def pause(n, rng):\n    return min(5.0, 0.1 * 2 ** min(n, 30)) * rng.random()\n",
        "fedhh/privacy/dots.py":  # (a power of two that is a constant: no pause)
            "def move(m):\n    return min(m, 16.0 * 2.0**-53)\n",
        "fedhh/backoff.py":
            "import asyncio\n\n\nasync def sleep(c):\n    await asyncio.sleep(c * 2)\n\n\n"
            "def grow(n, cap):\n    return min(2 * n, cap)\n"})
    assert sorted(hand_written_backoffs(tmp_path)) == [
        "aggregator/fedhh_aggregator/wait.py:7 doubles a pause by hand in wait",
        "device/fedhh_device/calls.py:8 doubles a pause to a cap by hand in retry",
        "device/fedhh_device/polls.py:2 doubles a pause to a cap by hand in pause",
        "server/fedhh_coordinator/db/store.py:3 doubles a pause to a cap by hand in failed",
        "server/fedhh_coordinator/poll.py:8 doubles a pause to a cap by hand in poll"]
