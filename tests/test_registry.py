"""The registry is the one list of result tables: every table has a title, a place on the
results page, a figure drawer for each figure it declares, and analysis/ has no import cycle."""

from __future__ import annotations

import inspect
from collections import defaultdict

import pytest

from analysis import charts, pipeline, registry
from analysis.exporting import exports
from tests.support.import_graph import circles, import_graph


def test_it_gives_every_table_a_title_a_section_and_a_description():
    for analysis in registry.REGISTERED:
        assert analysis.title and analysis.description, analysis.name
        assert analysis.section in registry.SECTIONS, analysis.name
        assert analysis.needs <= registry.FEATURES, analysis.name


def test_every_registered_table_has_a_place_on_the_results_page():
    placed = [a.name for _, _, members in registry.sections(a.name for a in registry.REGISTERED) for a in members]
    assert sorted(placed) == sorted(a.name for a in registry.REGISTERED)


def test_every_registered_table_is_an_export_under_its_own_file_name():
    files = {export.filename for export in exports.EXPORTS.values()}
    assert {a.filename for a in registry.REGISTERED} <= files


def test_every_table_carries_its_columns_and_the_codebook_takes_them_from_the_entry():
    from analysis import table_columns
    from analysis.exporting import codebook

    for analysis in registry.REGISTERED:
        if analysis.sensitivity_of:
            assert not analysis.columns, analysis.name  # a variant reads its base table's
            continue
        assert analysis.columns, analysis.name
        assert all(isinstance(entry, table_columns.Column) and entry.type in table_columns.TYPES
                   for entry in analysis.columns.values()), analysis.name
        assert codebook.TABLE_COLUMNS[analysis.filename] == dict(analysis.columns)


def test_every_declared_figure_has_a_drawer_and_every_drawer_a_table():
    declared = {figure for a in registry.REGISTERED for figure in a.figures}
    assert declared == set(charts.DRAWERS)
    assert registry.figure_source("map_S1").name == "region_means"
    assert registry.figure_source("win_grid").name == "win_table"
    assert registry.figure_source("nothing") is None


def test_every_computed_analysis_takes_the_frames_it_declares():
    for analysis in registry.statistics_analyses():
        target = registry.base_of(analysis) if analysis.sensitivity_of else analysis
        assert set(target.inputs) <= set(registry.INPUTS), analysis.name
        parameters = list(inspect.signature(target.function).parameters.values())
        positional = [p for p in parameters if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
        assert len(positional) >= len(target.inputs), analysis.name
        accepted = {p.name for p in parameters}
        has_kwargs = any(p.kind == p.VAR_KEYWORD for p in parameters)
        assert has_kwargs or set(target.options) <= accepted, analysis.name


def test_a_design_gets_only_the_analyses_whose_needs_it_has():
    rating_only = {a.name for a in registry.statistics_analyses(design={"ratings"})}
    assert "descriptives" in rating_only and "position_bias" in rating_only
    assert not rating_only & {"ttests", "anova", "bradley_terry", "best_worst", "win_table", "rater_judge"}
    everything = {a.name for a in registry.statistics_analyses(design=registry.FEATURES)}
    assert everything == {a.name for a in registry.statistics_analyses()}
    # Variants come after the analysis they rerun.
    order = [a.name for a in registry.statistics_analyses()]
    assert order.index("sensitivity_win_table") > order.index("win_table")


def test_the_options_come_from_the_settings_each_entry_names(settings):
    settings.ANALYSIS_MODEL_MAX_ROWS = 1234
    settings.ANALYSIS_BOOTSTRAP_SAMPLES = 7
    options = pipeline.options_from_settings(registry.REGISTERED)
    assert options["mixed_model"] == {"max_rows": 1234} and options["bradley_terry"] == {"n_boot": 7}
    assert "win_table" not in options


def test_there_is_no_import_cycle_in_analysis():
    graph = {module: {t for t in targets if t.startswith("analysis.")}
             for module, targets in import_graph().items() if module.startswith("analysis.")}
    # The graph sees absolute, relative and function-level imports.
    assert "analysis.running.runs" in graph["analysis.tasks"] and "analysis.pipeline" in graph["analysis.running.runs"]
    assert "analysis.running.runs" in graph["analysis.views"]
    assert circles(defaultdict(set, graph)) == []
