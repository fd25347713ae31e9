"""The repository's imports point one way, and no modules import each other round in a circle.

Layers, from the bottom: ``web`` (the shared web plumbing: security, accounts, the clock, the researcher
action signal) <- ``surveys`` (studies and participants) <- ``analysis`` <- ``bots``, ``prolific``,
``judges``, ``audit`` <- ``config``. A package imports its own modules and those of lower layers only; where
a lower one must reach a higher one it defines a hook the higher one registers with (a signal, a registry:
``surveys.retention.identifiers_removing``, ``analysis.judge_source``, ``analysis.running.runs.run_kind_register``,
``bots.question_bots``). Every import counts: at module level, inside functions and under ``TYPE_CHECKING``.
"""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
LAYERS = (("web",), ("surveys",), ("analysis",), ("bots", "prolific", "judges", "audit"), ("config",))
LAYER_OF = {package: depth for depth, packages in enumerate(LAYERS) for package in packages}


def _modules() -> dict[str, Path]:
    modules = {}
    for package in LAYER_OF:
        for path in (ROOT / package).rglob("*.py"):
            if "migrations" in path.parts:
                continue
            parts = path.relative_to(ROOT).with_suffix("").parts
            modules[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return modules


def _imported(module: str, path: Path, node: ast.Import | ast.ImportFrom) -> list[str]:
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    if node.level == 0:
        base = node.module or ""
    else:
        package = module.split(".") if path.name == "__init__.py" else module.split(".")[:-1]
        package = package[: len(package) - (node.level - 1)]
        base = ".".join([*package, *([node.module] if node.module else [])])
    return [base, *(f"{base}.{alias.name}" for alias in node.names)]


def import_graph() -> dict[str, set[str]]:
    """Module -> the modules of the repository's packages it imports, by any import statement."""
    modules = _modules()
    graph: dict[str, set[str]] = defaultdict(set)
    for module, path in modules.items():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                graph[module].update(name for name in _imported(module, path, node)
                                     if name in modules and name != module)
    return graph


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, successors = work[-1]
            for successor in successors:
                if successor not in index:
                    index[successor] = low[successor] = len(index)
                    stack.append(successor)
                    on_stack.add(successor)
                    work.append((successor, iter(sorted(graph[successor]))))
                    break
                if successor in on_stack:
                    low[node] = min(low[node], index[successor])
            else:
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


def test_no_modules_import_each_other_round_in_a_circle():
    assert circles(import_graph()) == []


def test_every_import_points_to_the_same_package_or_a_lower_layer():
    upward = sorted(
        f"{module} -> {target}"
        for module, targets in import_graph().items() for target in targets
        if LAYER_OF[target.split(".")[0]] > LAYER_OF[module.split(".")[0]]
    )
    assert upward == []


@pytest.mark.parametrize("graph, expected", [
    ({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}, [["a", "b", "c"]]),
    ({"a": {"b"}, "b": set(), "c": {"d"}, "d": {"c"}}, [["c", "d"]]),
    ({"a": {"b"}, "b": set()}, []),
])
def test_the_circle_finder_finds_circles_worked_by_hand(graph, expected):
    assert sorted(circles(defaultdict(set, graph))) == expected


def test_the_graph_sees_imports_inside_functions_and_under_type_checking():
    graph = import_graph()
    assert "analysis.judge_source" in graph["analysis.design"]  # imported inside _has_judges
    assert "surveys.page_answers" in graph["surveys.questions.base"]  # under TYPE_CHECKING
