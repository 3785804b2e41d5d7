"""The layers of docs/architecture.md, enforced over every import: at the top of a module and inside functions.

A layer imports only the layers below it (`cli` > `bwrap`, `seatbelt` > `proxy` >
`profiles` > `core`), the two backends never each other, and no module imports,
however indirectly, one that imports it back (a cycle an import inside a
function hides is a cycle all the same). Imports a type checker alone reads
(under `if TYPE_CHECKING:`) cost nothing at run time and are left out. The
reverse of tests/test_layout.py is here too: a test file of a code folder names
a module of that folder, unless it is listed with what it tests across modules.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SOURCE = ROOT / "src" / "stockade"

# docs/architecture.md's table: a layer may import those of a lower rank, and its own package
RANK = {"core": 0, "profiles": 1, "checkpoints": 1, "proxy": 2, "containers": 2, "bwrap": 3, "seatbelt": 3, "cli": 4}

# inside a layer, its subpackages in their own order ("" is the layer's own modules, shared by all of them);
# two subpackages of one rank never import each other
SUBLAYERS = {
    "proxy": {"": 0, "rules": 1, "client": 2, "filter": 2, "daemon": 3},
    "bwrap": {"parts": 0, "after": 1, "running": 2, "plan": 3, "": 4},
}

# test files of a code folder that test more than one module, with what they test
ACROSS_MODULES = {
    "tests/bwrap/test_plan_reads.py": "what planning reads, over the whole planner",
    "tests/bwrap/test_socket_race.py": "host sockets that vanish while bwrap starts (execute, host_sockets)",
    "tests/cli/test_cli.py": "the Typer application's commands end to end",
    "tests/cli/agents/test_codex_gemini_rules.py": "the Codex and Gemini hook rules together (agents/codex, agents/gemini)",
    "tests/cli/test_examples.py": "every example in examples/ against the commands",
    "tests/cli/test_fault_matrix.py": "every command against broken environments (exit codes)",
    "tests/cli/test_hook_fuzz.py": "the hook against generated payloads",
    "tests/cli/test_lean_path.py": "what a cached run imports",
    "tests/cli/test_policy_small_items.py": "small behaviours of several commands",
    "tests/cli/test_shown.py": "how commands show paths and policies",
    "tests/profiles/test_host_rules.py": "host rules across domains, decide and narrow",
    "tests/profiles/test_implicit_base.py": "the user's default policy under every other",
    "tests/profiles/test_policy_conflicts.py": "policies whose rules conflict, through the whole pipeline",
    "tests/profiles/test_policy_fuzz.py": "generated policies through the loader",
}


def _module_name(path: Path) -> str:
    parts = path.relative_to(SOURCE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {_module_name(path): path for path in SOURCE.rglob("*.py")}


def _type_checking_only(tree: ast.AST) -> set[int]:
    """The nodes under `if TYPE_CHECKING:`."""
    found: set[int] = set()
    for node in ast.walk(tree):
        test = getattr(node, "test", None)
        if isinstance(node, ast.If) and (getattr(test, "id", None) == "TYPE_CHECKING" or getattr(test, "attr", None) == "TYPE_CHECKING"):
            found.update(id(inner) for inner in ast.walk(node))
    return found


def imports(path: Path) -> Iterator[tuple[str, int]]:
    """(the stockade module imported, line) for every import of `path` a run can execute."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    skipped = _type_checking_only(tree)
    for node in ast.walk(tree):
        if id(node) in skipped:
            continue
        if isinstance(node, ast.Import):
            yield from ((alias.name, node.lineno) for alias in node.names if alias.name.startswith("stockade"))
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module and node.module.startswith("stockade"):
            for alias in node.names:  # `from stockade.pkg import module` imports that module
                name = f"{node.module}.{alias.name}"
                yield (name if name in MODULES else node.module), node.lineno


def _package(module: str) -> str:
    return module.split(".")[1] if module.count(".") else ""


def test_no_import_goes_up_or_across_the_layers() -> None:
    wrong = []
    for module, path in sorted(MODULES.items()):
        own = _package(module)
        for target, line in imports(path):
            other = _package(target)
            if other in (own, "") or own not in RANK:
                continue
            if RANK.get(other, 99) >= RANK[own]:
                wrong.append(f"{path.relative_to(ROOT)}:{line}: {own} imports {target}")
    assert wrong == [], "imports against docs/architecture.md's layers:\n" + "\n".join(wrong)


def _subpackage(module: str) -> str:
    parts = module.split(".")
    return parts[2] if len(parts) > 3 else ""


def test_no_import_goes_up_or_across_the_subpackages_of_a_layer() -> None:
    wrong = []
    for module, path in sorted(MODULES.items()):
        own = _package(module)
        table = SUBLAYERS.get(own)
        if table is None:
            continue
        mine = _subpackage(module)
        for target, line in imports(path):
            if _package(target) != own:
                continue
            theirs = _subpackage(target)
            if theirs != mine and table.get(theirs, 99) >= table.get(mine, -1):
                wrong.append(f"{path.relative_to(ROOT)}:{line}: {own}/{mine or '.'} imports {target}")
    assert wrong == [], "imports against the order of a layer's subpackages (SUBLAYERS, docs/architecture.md):\n" + "\n".join(wrong)


def test_every_subpackage_is_in_its_layers_order() -> None:
    found = {(_package(m), _subpackage(m)) for m in MODULES if _package(m) in SUBLAYERS and m.count(".") > 2}
    missing = sorted(f"{layer}/{sub}" for layer, sub in found if sub not in SUBLAYERS[layer])
    assert missing == [], f"add these subpackages to SUBLAYERS and docs/architecture.md: {missing}"


# subpackages that must not import mitmproxy: pure rules, and the run's side (on every networked run's path)
NO_MITMPROXY = ("stockade.proxy.rules.", "stockade.proxy.client.", "stockade.proxy.control", "stockade.proxy.audit", "stockade.proxy.summary")
MITMPROXY_ONCE = {"stockade.proxy.client.cabundle": "the user's CA, made the first time it is needed, as the daemon would make it"}


def _mitmproxy_imports(path: Path) -> list[int]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    skipped = _type_checking_only(tree)
    lines = []
    for node in ast.walk(tree):
        if id(node) in skipped:
            continue
        if isinstance(node, ast.Import) and any(alias.name.split(".")[0] == "mitmproxy" for alias in node.names):
            lines.append(node.lineno)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and (node.module or "").split(".")[0] == "mitmproxy":
            lines.append(node.lineno)
    return lines


def test_pure_rules_and_the_runs_side_import_no_mitmproxy() -> None:
    wrong = [
        f"{path.relative_to(ROOT)}:{line}"
        for module, path in sorted(MODULES.items())
        if module.startswith(NO_MITMPROXY) and module not in MITMPROXY_ONCE
        for line in _mitmproxy_imports(path)
    ]
    assert wrong == [], f"mitmproxy imported where proxy/__init__.py says it is not: {wrong}"


def test_the_mitmproxy_check_sees_an_import_inside_a_function(tmp_path: Path) -> None:
    """Control: the check above can fail."""
    module = tmp_path / "m.py"
    module.write_text("def f():\n    from mitmproxy import http\n    import mitmproxy.dns\n")
    assert _mitmproxy_imports(module) == [2, 3]


def test_no_module_imports_itself_back() -> None:
    edges = {module: {target for target, _line in imports(path) if target in MODULES and target != module} for module, path in MODULES.items()}
    cycles = _cycles(edges)
    assert cycles == [], f"import cycles (an import inside a function counts): {cycles}"


def _cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Tarjan's strongly connected components of more than one module."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(module: str) -> None:
        index[module] = low[module] = len(index)
        stack.append(module)
        on_stack.add(module)
        for target in sorted(edges[module]):
            if target not in index:
                visit(target)
                low[module] = min(low[module], low[target])
            elif target in on_stack:
                low[module] = min(low[module], index[target])
        if low[module] == index[module]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == module:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for module in sorted(edges):
        if module not in index:
            visit(module)
    return found


def test_the_cycle_finder_finds_a_cycle_and_no_other() -> None:
    """Control: the check above can fail."""
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert _cycles({"a": {"b"}, "b": set()}) == []


def test_an_upward_import_inside_a_function_is_seen(tmp_path: Path) -> None:
    """Control: the imports a function makes, not those a type checker alone reads."""
    module = tmp_path / "m.py"
    module.write_text(
        "TYPE_CHECKING = False\nif TYPE_CHECKING:\n    from stockade.cli import main\ndef f():\n    from stockade.proxy.rules.decide import decide\n"
    )
    assert [name for name, _line in imports(module)] == ["stockade.proxy.rules.decide"]


def test_every_test_file_of_a_code_folder_names_its_module() -> None:
    orphans = []
    for folder in RANK:
        for test in sorted((ROOT / "tests" / folder).rglob("test_*.py")):
            package = ".".join(test.parent.relative_to(ROOT / "tests").parts)
            module = f"stockade.{package}.{test.stem.removeprefix('test_')}"
            name = str(test.relative_to(ROOT))
            if module not in MODULES and name not in ACROSS_MODULES:
                orphans.append(name)
    assert orphans == [], f"test files whose module is gone (or list them in ACROSS_MODULES with what they test): {orphans}"
    gone = [name for name in ACROSS_MODULES if not (ROOT / name).is_file()]
    assert gone == [], gone
