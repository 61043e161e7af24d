"""The core's one-way layering (docs/architecture.md), checked on the
includes: a file may include its own folder and the folders below it, never
one above; no folder under core/backends/ includes another, and a backend
reaches the backends' root only for the interface (backend.h), and nothing
in core/ includes a file of the repository outside it (the MPI plugins'
contract, core/os/mpi_plugin_api.h, lives in the core). Also the
order of ringcc.torch's Horovod API: the collectives (the package
ringcc.torch.horovod) import none of the modules built on them; that the
Python package (adapters/ringcc) has no import circle and that
ringcc.elastic (the workers' side) never imports ringcc.launch (ringrun);
and the sizes of files and functions, in core/, bindings/ and adapters/."""

from __future__ import annotations

import ast
import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
CORE = REPO / "core"

# Each layer and the layers it may include, lowest first.
BELOW = {
    "base": set(),
    "os": {"base"},
    "collective": {"base"},
    "rendezvous": {"base", "os"},
    "transport": {"base", "os", "rendezvous"},
    "device": {"base", "os", "collective"},
    "algorithms": {"base", "os", "collective", "rendezvous", "transport"},
}
BELOW["backends"] = set(BELOW)  # the interface, the registry
BELOW["communicator"] = BELOW["backends"] | {"backends"}  # core/communicator.*
BELOW["engine"] = BELOW["communicator"] | {"communicator"}

INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)


def layer_of(path: str) -> tuple[str, str]:
    """(layer, backend folder or "") of a path relative to the repository."""
    parts = Path(path).parts
    if len(parts) == 2:
        return "communicator", ""
    if parts[1] == "backends":
        return "backends", parts[2] if len(parts) > 3 else ""
    return parts[1], ""


def upward_edges(core: Path = CORE) -> list[str]:
    problems = []
    for source in sorted(core.rglob("*")):
        if source.suffix not in (".h", ".cc", ".cuh"):
            continue
        name = str(source.relative_to(core.parent))
        layer, backend = layer_of(name)
        if layer not in BELOW:
            problems.append(f"{name}: core/{Path(name).parts[1]} is not a layer of docs/architecture.md")
            continue
        for included in INCLUDE.findall(source.read_text()):
            if not included.startswith("core/"):
                problems.append(f"{name} includes {included}: outside core/")
                continue
            to_layer, to_backend = layer_of(included)
            if to_layer == layer and to_backend == backend:
                continue
            if to_layer == "backends":
                if backend and to_backend:
                    problems.append(f"{name} includes {included}: a backend includes another")
                elif backend and included != "core/backends/backend.h":
                    problems.append(f"{name} includes {included}: a backend reaches the registry")
                elif not backend and to_backend:
                    problems.append(f"{name} includes {included}: the {layer} reaches a backend past the registry")
                elif layer not in ("backends", "communicator", "engine"):
                    problems.append(f"{name} includes {included}: {layer} is below the backends")
            elif to_layer not in BELOW[layer]:
                problems.append(f"{name} includes {included}: {to_layer} is not below {layer}")
    return problems


def test_core_includes_point_downwards():
    assert upward_edges() == []


def test_the_check_sees_an_upward_include(tmp_path):
    # The same check on a copy with one include that points up, and one
    # between two backends, and one that leaves core/: all are reported.
    core = tmp_path / "core"
    (core / "base").mkdir(parents=True)
    (core / "base" / "x.h").write_text('#include "core/engine/engine.h"\n')
    (core / "os").mkdir(parents=True)
    (core / "os" / "y.h").write_text('#include "plugins/mpi/z.h"\n')
    (core / "backends" / "one").mkdir(parents=True)
    (core / "backends" / "one" / "a.cc").write_text('#include "core/backends/two/b.h"\n')
    assert len(upward_edges(core)) == 3


def test_core_has_no_source_outside_its_layers():
    loose = [p.name for p in CORE.iterdir() if p.is_file() and p.suffix in (".h", ".cc")]
    assert sorted(loose) == ["communicator.cc", "communicator.h", "communicator_report.cc"]


# Sizes that keep a file and a function readable in one sitting.
MAX_FILE_LINES = 800
MAX_FUNCTION_LINES = 120
# A definition starts at the left margin (the code's style) and opens its
# body at the end of that line or of a continuation line; its body ends at
# the closing brace at the left margin.
DEFINITION = re.compile(
    r"^(?!namespace\b|class\b|struct\b|enum\b|union\b|extern\b|template\b|using\b|typedef\b)[A-Za-z_].*\("
)


def long_functions(root: Path, limit: int = MAX_FUNCTION_LINES) -> list[str]:
    """Functions defined at the left margin whose definitions run past `limit` lines."""
    found = []
    for source in sorted(root.rglob("*")):
        if source.suffix not in (".h", ".cc", ".cuh"):
            continue
        start, in_body = None, False
        for number, line in enumerate(source.read_text().splitlines(), 1):
            if start is None:
                if DEFINITION.match(line):
                    start = number
                else:
                    continue
            if not in_body:
                if line.rstrip().endswith("{"):
                    in_body = True
                elif line.rstrip().endswith((";", "}")) or not line.strip():
                    start = None  # a declaration, or a one-line definition
                continue
            if line.startswith("}"):
                if number - start + 1 > limit:
                    found.append(f"{source.relative_to(root.parent)}:{start}: {number - start + 1} lines")
                start, in_body = None, False
    return found


BINDINGS = REPO / "bindings"


def long_files(root: Path, limit: int = MAX_FILE_LINES, suffixes=(".h", ".cc", ".cuh")) -> list[str]:
    """Files under `root` with one of `suffixes` (C++ sources and headers
    unless told) over `limit` lines."""
    return [
        f"{p.relative_to(root.parent)}: {n} lines"
        for p in sorted(root.rglob("*"))
        if p.suffix in suffixes
        for n in [len(p.read_text().splitlines())]
        if n > limit
    ]


def test_no_core_file_is_too_long():
    assert long_files(CORE) == []


def test_no_bindings_file_is_too_long():
    assert long_files(BINDINGS) == []


def test_the_file_length_check_sees_a_long_file(tmp_path):
    (tmp_path / "bindings").mkdir()
    (tmp_path / "bindings" / "long.cc").write_text("int x;\n" * (MAX_FILE_LINES + 1))
    (tmp_path / "bindings" / "short.h").write_text("int y;\n" * MAX_FILE_LINES)
    assert long_files(tmp_path / "bindings") == [f"bindings/long.cc: {MAX_FILE_LINES + 1} lines"]


def test_no_function_is_too_long():
    assert long_functions(CORE) + long_functions(BINDINGS) == []


def test_the_length_check_sees_a_long_function(tmp_path):
    (tmp_path / "core").mkdir()
    body = "\n".join(f"  x += {i};" for i in range(MAX_FUNCTION_LINES))
    (tmp_path / "core" / "long.cc").write_text(
        f"int Long::f(int x) const {{\n{body}\n}}\n\nint g() {{\n  return 1;\n}}\n"
    )
    assert long_functions(tmp_path / "core") == [f"core/long.cc:1: {MAX_FUNCTION_LINES + 2} lines"]


# -- the Python package: adapters/ringcc ---------------------------------------

ADAPTERS = REPO / "adapters"
# The module the build makes of bindings/: a leaf of the import graph.
COMPILED_MODULES = {"ringcc._core"}


def module_name(path: Path, root: Path = ADAPTERS) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def import_graph(root: Path = ADAPTERS) -> dict[str, set[str]]:
    """{module: the modules of the package it imports}, read from the source
    (ast), every import counted wherever it stands (in a function too).
    `from P import N` counts as importing P.N when that is a module, else P;
    a package's __init__ that Python runs on the way to a submodule is not
    counted (every module would otherwise import ringcc)."""
    modules = {module_name(p, root): p for p in sorted(root.rglob("*.py"))}
    known = set(modules) | COMPILED_MODULES
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        targets: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                targets.update(alias.name for alias in node.names if alias.name in known)
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                    base = ".".join(anchor + ([base] if base else []))
                for alias in node.names:
                    if f"{base}.{alias.name}" in known:
                        targets.add(f"{base}.{alias.name}")
                    elif base in known:
                        targets.add(base)
        graph[name] = targets - {name}
    return graph


def import_cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The circles of the graph: each strongly connected set of two or more modules."""
    order: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    cycles = []

    def visit(module: str) -> None:
        order[module] = low[module] = len(order)
        stack.append(module)
        for target in sorted(graph.get(module, ())):
            if target not in order:
                visit(target)
                low[module] = min(low[module], low[target])
            elif target in stack:
                low[module] = min(low[module], order[target])
        if low[module] == order[module]:
            members = []
            while True:
                member = stack.pop()
                members.append(member)
                if member == module:
                    break
            if len(members) > 1:
                cycles.append(sorted(members))

    for module in sorted(graph):
        if module not in order:
            visit(module)
    return cycles


def test_ringcc_has_no_import_circle():
    assert import_cycles(import_graph()) == []


def test_the_circle_check_sees_a_circle(tmp_path):
    package = tmp_path / "pkg"
    (package / "sub").mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "a.py").write_text("from pkg.sub import b\n")
    (package / "sub" / "__init__.py").write_text("")
    (package / "sub" / "b.py").write_text("def f():\n    from .. import a\n")
    (package / "c.py").write_text("import pkg.a\n")
    graph = import_graph(tmp_path)
    assert graph["pkg.a"] == {"pkg.sub.b"} and graph["pkg.sub.b"] == {"pkg.a"} and graph["pkg.c"] == {"pkg.a"}
    assert import_cycles(graph) == [["pkg.a", "pkg.sub.b"]]


def test_the_elastic_worker_side_never_imports_the_launcher():
    # ringcc.elastic runs in the workers; ringrun's elastic driver
    # (ringcc.launch) uses it (the protocol, the workers' variables), never
    # the other way round.
    graph = import_graph()
    worker_side = [m for m in graph if m == "ringcc.elastic" or m.startswith("ringcc.elastic.")]
    assert worker_side
    reaching = {
        m: sorted(t for t in graph[m] if t == "ringcc.launch" or t.startswith("ringcc.launch.")) for m in worker_side
    }
    assert {m: t for m, t in reaching.items() if t} == {}


def test_nothing_in_ringcc_imports_the_benches():
    # ringcc.bench sits on top of the package (it times ringcc and its
    # peers); a user's job never loads it.
    graph = import_graph()
    outside = {m: sorted(t for t in targets if t.startswith("ringcc.bench")) for m, targets in graph.items()}
    assert any(m.startswith("ringcc.bench.") for m in graph)
    assert {m: t for m, t in outside.items() if t and not m.startswith("ringcc.bench")} == {}


# ringcc.torch's Horovod API: the collectives (the package
# ringcc.torch.horovod, every module of it) and the modules built on them,
# each with what it may import of the others.
TORCH_HOROVOD_ORDER = {
    "ringcc.torch.horovod": set(),
    "ringcc.torch.functions": {"ringcc.torch.horovod"},
    "ringcc.torch.optimizer": {"ringcc.torch.horovod", "ringcc.torch.functions"},
    "ringcc.torch.sync_batch_norm": {"ringcc.torch.horovod"},
}


def torch_horovod_layer(module: str) -> str | None:
    """The entry of TORCH_HOROVOD_ORDER that `module` is or lies in."""
    for layer in TORCH_HOROVOD_ORDER:
        if module == layer or module.startswith(layer + "."):
            return layer
    return None


def upward_torch_imports(graph: dict[str, set[str]]) -> list[str]:
    problems = []
    for module in sorted(graph):
        layer = torch_horovod_layer(module)
        if layer is None:
            continue
        reached = {torch_horovod_layer(t) for t in graph[module]} - {None, layer}
        for above in sorted(reached - TORCH_HOROVOD_ORDER[layer]):
            problems.append(f"{module} imports {above}, which is built on it")
    return problems


def test_ringcc_torch_modules_import_downwards():
    assert upward_torch_imports(import_graph()) == []


def test_the_torch_order_check_sees_an_upward_import():
    graph = {
        "ringcc.torch.horovod.basics": {"ringcc.torch.functions"},
        "ringcc.torch.functions": {"ringcc.torch.horovod.calls"},
        "ringcc.torch.sync_batch_norm": {"ringcc.torch.optimizer", "ringcc.torch.horovod"},
    }
    assert upward_torch_imports(graph) == [
        "ringcc.torch.horovod.basics imports ringcc.torch.functions, which is built on it",
        "ringcc.torch.sync_batch_norm imports ringcc.torch.optimizer, which is built on it",
    ]


# ringcc.launch's modules and what each may import of the package
# (docs/architecture.md, "The outer ring").
LAUNCH_DOORS = {
    "errors": set(),
    "hosts": {"errors", "ringcc.free_ports"},
    "variables": {"errors", "hosts"},
    "processes": {"errors", "hosts"},
    "agents": {"errors", "variables"},
    "allocation": {"errors", "hosts", "ringcc.slurm"},
    "plan": {"errors", "hosts", "variables", "agents", "processes", "allocation"},
    "mpirun": {"errors", "hosts", "variables"},
    "build_report": set(),
    "horovodrun_options": {"errors", "agents"},
    "unknown_options": set(),
    "discovery": {"errors", "hosts", "processes"},
    "blacklist": set(),
    "memberships": set(),
    "rpc_server": {"ringcc.elastic.protocol"},
    "elastic_driver": {
        "errors",
        "hosts",
        "variables",
        "processes",
        "agents",
        "discovery",
        "blacklist",
        "memberships",
        "rpc_server",
        "ringcc.elastic.worker",
    },
}
LAUNCH_DOORS["cli"] = {
    "errors",
    "hosts",
    "processes",
    "plan",
    "mpirun",
    "build_report",
    "elastic_driver",
    "horovodrun_options",
    "unknown_options",
}


def test_ringcc_launch_modules_use_only_their_doors():
    graph = import_graph()
    prefix = "ringcc.launch."
    modules = {m[len(prefix) :] for m in graph if m.startswith(prefix)}
    assert modules == set(LAUNCH_DOORS), "a module of ringcc.launch is missing from LAUNCH_DOORS (or gone)"
    for module in sorted(modules):
        used = {t[len(prefix) :] if t.startswith(prefix) else t for t in graph[prefix + module]}
        assert used <= LAUNCH_DOORS[module], f"ringcc/launch/{module}.py imports {sorted(used - LAUNCH_DOORS[module])}"


def long_python_functions(root: Path, limit: int = MAX_FUNCTION_LINES) -> list[str]:
    """Functions and methods (decorators left out) over `limit` lines."""
    found = []
    for source in sorted(root.rglob("*.py")):
        for node in ast.walk(ast.parse(source.read_text(), str(source))):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                length = node.end_lineno - node.lineno + 1
                if length > limit:
                    found.append(f"{source.relative_to(root.parent)}:{node.lineno}: {node.name}, {length} lines")
    return found


def test_no_adapter_module_is_too_long():
    assert long_files(ADAPTERS, suffixes=(".py",)) == []


def test_no_adapter_function_is_too_long():
    assert long_python_functions(ADAPTERS) == []


def test_the_length_check_sees_a_long_python_function(tmp_path):
    (tmp_path / "pkg").mkdir()
    body = "\n".join(f"    x += {i}" for i in range(MAX_FUNCTION_LINES))
    (tmp_path / "pkg" / "long.py").write_text(f"@staticmethod\ndef f(x):\n{body}\n\n\ndef g():\n    return 1\n")
    assert long_python_functions(tmp_path / "pkg") == [f"pkg/long.py:2: f, {MAX_FUNCTION_LINES + 1} lines"]
