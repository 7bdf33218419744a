"""The house checks itself: no module of the crawler imports in a circle, counted on the
graph import-linter reads (grimp's), each import as written (at the top of a module or
inside a function).  The layers themselves are import-linter contracts
(``[tool.importlinter]`` in pyproject.toml), checked by ``lint-imports`` in scripts/test.
And few of its functions are long: at most :data:`LONG_ALLOWED` over :data:`LONG` lines."""

from __future__ import annotations

import ast
from pathlib import Path

import grimp

#: Lines (from ``def`` to its last line) past which a function is long.
LONG = 60
#: How many functions of the crawler may be long.
LONG_ALLOWED = 2


def circles(graph: grimp.ImportGraph) -> list[list[str]]:
    """The import circles of ``graph``: each set of modules that import one another,
    directly or not (Tarjan's strongly connected components of more than one module,
    or of one that imports itself)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(module: str) -> None:
        index[module] = low[module] = len(index)
        stack.append(module)
        on_stack.add(module)
        for imported in sorted(graph.find_modules_directly_imported_by(module)):
            if imported not in index:
                visit(imported)
                low[module] = min(low[module], low[imported])
            elif imported in on_stack:
                low[module] = min(low[module], index[imported])
        if low[module] == index[module]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == module:
                    break
            if len(component) > 1 or module in graph.find_modules_directly_imported_by(module):
                found.append(sorted(component))

    for module in sorted(graph.modules):
        if module not in index:
            visit(module)
    return found


def test_no_module_of_the_crawler_imports_in_a_circle() -> None:
    assert circles(grimp.build_graph("crawler")) == []


def test_a_circle_is_found_where_there_is_one() -> None:
    graph = grimp.ImportGraph()
    for module in ("a", "a.b", "a.c", "a.d"):
        graph.add_module(module)
    graph.add_import(importer="a.b", imported="a.c")
    graph.add_import(importer="a.c", imported="a.d")
    graph.add_import(importer="a.d", imported="a.b")
    assert circles(graph) == [["a.b", "a.c", "a.d"]]
    graph.remove_import(importer="a.d", imported="a.b")
    assert circles(graph) == []


def long_functions(source: str, name: str) -> list[str]:
    """The functions of ``source`` (the module ``name``) over :data:`LONG` lines, each
    as ``name:function (lines)``."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            lines = (node.end_lineno or node.lineno) - node.lineno + 1
            if lines > LONG:
                found.append(f"{name}:{node.name} ({lines})")
    return found


def test_at_most_two_functions_of_the_crawler_are_long() -> None:
    package = Path(__file__).parent.parent / "crawler"
    long = [
        found
        for path in sorted(package.rglob("*.py"))
        for found in long_functions(path.read_text(), str(path.relative_to(package.parent)))
    ]
    assert len(long) <= LONG_ALLOWED, f"functions over {LONG} lines: {long}"


def test_a_long_function_is_found_where_there_is_one() -> None:
    body = "".join(f"    x = {i}\n" for i in range(LONG))
    source = f"def short():\n    pass\n\n\nasync def long():\n{body}"
    assert long_functions(source, "m.py") == [f"m.py:long ({LONG + 1})"]
