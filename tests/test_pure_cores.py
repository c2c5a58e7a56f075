"""The pure cores (agent/engine, hub/placement, hub/transitions) stay pure: they import only
the standard library's plain-data modules, the api/ contract and themselves — never a shell —
and read no clock. import-linter checks transitively that nothing they import does I/O; this
reads their source for what a forbidden-modules list cannot see: a new shell module, and a
clock read through `datetime` (which they need for its types)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
CORES = {
    "agent.engine": [ROOT / "agent" / "engine"],
    "hub.placement": [ROOT / "hub" / "placement", ROOT / "hub" / "transitions.py"],
}
PLAIN_DATA = frozenset(
    {
        "__future__",
        "abc",
        "bisect",
        "collections",
        "copy",
        "dataclasses",
        "datetime",
        "enum",
        "fractions",
        "functools",
        "heapq",
        "itertools",
        "math",
        "operator",
        "re",
        "types",
        "typing",
    }
)
CLOCK_READS = frozenset({"now", "utcnow", "today", "time", "monotonic", "perf_counter"})


def _sources(paths: list[Path]) -> list[Path]:
    out: list[Path] = []
    for path in paths:
        out += sorted(path.rglob("*.py")) if path.is_dir() else [path]
    return out


def _imports(tree: ast.Module) -> list[str]:
    names: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            # `from hub import transitions` imports the module hub.transitions, not all of
            # `hub`: judge each imported name by its full dotted path.
            names += [f"{node.module}.{alias.name}" for alias in node.names]
    return names


def _allowed(module: str, own: tuple[str, ...]) -> bool:
    root = module.split(".", maxsplit=1)[0]
    return (
        root in PLAIN_DATA
        or root == "api"
        or any(module == o or module.startswith(o + ".") for o in own)
    )


CASES = [(core, path) for core, paths in CORES.items() for path in _sources(paths)]


@pytest.mark.parametrize(("core", "path"), CASES, ids=[str(p.relative_to(ROOT)) for _, p in CASES])
def test_a_pure_core_imports_only_plain_data_the_contract_and_itself(core: str, path: Path) -> None:
    own = ("hub.placement", "hub.transitions") if core == "hub.placement" else (core,)
    tree = ast.parse(path.read_text())
    foreign = [m for m in _imports(tree) if not _allowed(m, own)]
    assert foreign == [], f"{path.relative_to(ROOT)} imports {foreign}"


@pytest.mark.parametrize(("core", "path"), CASES, ids=[str(p.relative_to(ROOT)) for _, p in CASES])
def test_a_pure_core_reads_no_clock(core: str, path: Path) -> None:
    tree = ast.parse(path.read_text())
    reads = [
        f"line {node.lineno}: .{node.func.attr}()"
        for node in ast.walk(tree)
        if isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr in CLOCK_READS
    ]
    assert reads == [], f"{path.relative_to(ROOT)} reads a clock ({core} takes `now`): {reads}"


def test_the_checks_see_a_clock_read_and_a_shell_import() -> None:
    tree = ast.parse(
        "from hub.dispatch import Dispatcher\nfrom hub import store, transitions\n"
        "import time\nx = datetime.now()\n"
    )
    assert [m for m in _imports(tree) if not _allowed(m, ("hub.placement", "hub.transitions"))] == [
        "hub.dispatch.Dispatcher",
        "hub.store",
        "time",
    ]
    calls = [n for n in ast.walk(tree) if isinstance(n, ast.Call)]
    assert isinstance(calls[0].func, ast.Attribute) and calls[0].func.attr in CLOCK_READS
