"""The repository's imports point one way, and no modules import each other round in a circle.

Layers, from the bottom: ``web`` (the shared web plumbing: security, accounts, the clock, the researcher
action signal) <- ``surveys`` (studies and participants) <- ``analysis`` <- ``bots``, ``prolific``,
``judges``, ``audit`` <- ``config``. A package imports its own modules and those of lower layers only; where
a lower one must reach a higher one it defines a hook the higher one registers with (a signal, a registry:
``surveys.retention.identifiers_removing``, ``analysis.judge_source``, ``analysis.running.runs.run_kind_register``,
``bots.question_bots``). Every import counts: at module level, inside functions and under ``TYPE_CHECKING``.
"""

from __future__ import annotations

from collections import defaultdict

import pytest

from tests.support.import_graph import PACKAGES, circles, import_graph
LAYERS = (("web",), ("surveys",), ("analysis",), ("bots", "prolific", "judges", "audit"), ("config",))
LAYER_OF = {package: depth for depth, packages in enumerate(LAYERS) for package in packages}


def test_the_layers_name_every_package_of_the_graph():
    assert set(LAYER_OF) == set(PACKAGES)


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
