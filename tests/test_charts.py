"""The results page's figures as plotly dicts: axes on the rating scale, labels that say what they show."""

from __future__ import annotations

import base64

import numpy as np
import pandas as pd
import pytest

from analysis import charts, selectors
from analysis.registry import figure_sources


def _descriptives() -> pd.DataFrame:
    rows = [
        ("S1", "gpt", "zero-shot", 3.2, 2.9, 3.5), ("S1", "gpt", "fine-tuned", 4.1, 3.8, 4.4),
        ("S2", "gpt", "zero-shot", 2.5, 2.0, 3.0), ("S2", "gpt", "fine-tuned", 4.6, 4.2, 5.0),
    ]
    return pd.DataFrame(rows, columns=["scenario", "model", "condition", "mean", "ci_low", "ci_high"])


def _numbers(values) -> list[float]:
    """A plotly array as numbers: plotly's JSON packs numpy arrays as base64 typed arrays."""
    if isinstance(values, dict):
        return np.frombuffer(base64.b64decode(values["bdata"]), dtype=values["dtype"]).tolist()
    return [float(v) for v in values]


def _axes(figure: dict, prefix: str) -> list[dict]:
    return [value for key, value in figure["layout"].items() if key.startswith(prefix)]


def test_mean_rating_bars_rise_from_the_scale_bottom_not_from_zero():
    table = _descriptives()
    figure = charts.rating_means_by_scenario(table, scale=(1, 5))
    assert [axis["range"] for axis in _axes(figure, "yaxis")] == [[1.0, 5.0], [1.0, 5.0]]
    # One trace per (scenario, condition), in the table's order, one bar each here.
    assert len(figure["data"]) == len(table)
    for trace, (_, row) in zip(figure["data"], table.iterrows()):
        assert trace["name"] == row["condition"]
        assert trace["base"] == 1
        # The bar's top (base + height) is the mean; the label is the mean, not the height.
        assert [1 + height for height in _numbers(trace["y"])] == pytest.approx([row["mean"]])
        assert _numbers(trace["error_y"]["array"]) == pytest.approx([row["ci_high"] - row["mean"]])
        assert list(trace["text"]) == [f"{row['mean']:.2f}"]
        assert trace["textposition"] == "inside" and trace["insidetextanchor"] == "start"
        assert trace["cliponaxis"] is False


def test_without_a_scale_the_range_is_whole_points_around_the_data():
    table = _descriptives()
    # min over means and intervals is 2.0, max 5.0: whole points 2 to 5.
    assert charts.rating_axis_range(table) == [2.0, 5.0]
    # An interval past the top of the scale (small n, t-based) widens the top so no error bar is cut.
    wide = table.assign(ci_high=table["ci_high"].where(table["ci_high"] < 5, 5.3))
    assert charts.rating_axis_range(wide, scale=(1, 5)) == [1.0, 5.3]


def test_panels_are_titled_with_scenario_labels_and_fall_back_to_the_key():
    figure = charts.rating_means_by_scenario(_descriptives(), scale=(1, 5), scenario_labels={"S1": "Job loss"})
    titles = [a["text"] for a in figure["layout"]["annotations"]]
    assert titles == ["Job loss", "S2"]


def test_position_bias_bars_start_at_the_scale_bottom():
    table = pd.DataFrame({"position": [1, 2, 3], "mean": [3.0, 3.4, 3.1], "ci_low": [2.8, 3.1, 2.9],
                          "ci_high": [3.2, 3.7, 3.3], "p": [0.42, None, None]})
    figure = charts.position_bias_chart(table, scale=(1, 7))
    assert figure["layout"]["yaxis"]["range"] == [1.0, 7.0]
    (trace,) = figure["data"]
    assert trace["base"] == 1
    assert [1 + h for h in _numbers(trace["y"])] == pytest.approx([3.0, 3.4, 3.1])
    assert "p = 0.42" in figure["layout"]["title"]["text"]


def test_the_strength_title_is_a_sentence_built_from_the_method_column():
    method = "Plackett-Luce (MM), percentile bootstrap over participants"
    table = pd.DataFrame({"model": ["a", "b"], "condition": ["zero-shot", "fine-tuned"], "strength": [-0.3, 0.3],
                          "ci_low": [-0.5, 0.1], "ci_high": [-0.1, 0.5], "method": [method, method]})
    title = charts.strength_chart(table)["layout"]["title"]["text"]
    assert title == ("Plackett-Luce (MM) strength (log worth) per system, 95% CI by percentile bootstrap "
                     "over participants")
    assert charts.strength_title(None) == "Plackett-Luce strength (log worth) per system, 95% CI"


def test_results_figures_pass_the_study_context_to_the_drawers():
    tables = {"descriptives": _descriptives()}
    sources = [(key, name) for key, name in figure_sources() if name == "descriptives"]
    assert sources, "the registry draws rating_means from descriptives"
    figures = charts.results_figures(tables, sources, scale=(1, 5), scenario_labels={"S2": "Exam stress"})
    figure = figures["rating_means"]
    assert [a["text"] for a in figure["layout"]["annotations"]] == ["S1", "Exam stress"]
    assert figure["layout"]["yaxis"]["range"] == [1.0, 5.0]


@pytest.mark.django_db
def test_the_study_gives_its_scale_and_scenario_labels(tide):
    dimensions = list(tide.dimensions.all())
    assert selectors.study_rating_scale(study=tide) == (min(d.scale_min for d in dimensions),
                                                        max(d.scale_max for d in dimensions))
    labels = selectors.scenario_labels_of(study=tide)
    assert set(labels) == {s.key for s in tide.scenarios.all()}
    assert all(labels[s.key] == (s.label or s.key) for s in tide.scenarios.all())


def _shares() -> pd.DataFrame:
    rows = [("Human", "human", "most", 20, 0.50, 0.35, 0.65), ("GPT", "llm", "most", 8, 0.20, 0.10, 0.35),
            ("Human", "human", "least", 2, 0.05, 0.01, 0.17), ("GPT", "llm", "least", 16, 0.40, 0.26, 0.55)]
    table = pd.DataFrame(rows, columns=["model", "condition", "choice", "count", "share", "ci_low", "ci_high"])
    return table.assign(n_sets=40, chance_share=0.2)


def test_most_least_shares_are_grouped_bars_with_wilson_error_bars_told_apart_without_colour():
    figure = charts.best_worst_shares_chart(_shares())
    bars = [trace for trace in figure["data"] if trace["type"] == "bar"]
    assert [trace["name"] for trace in bars] == ["picked most", "picked least"]
    # Hatching as well as colour tells the two picks apart.
    patterns = [trace["marker"]["pattern"]["shape"] for trace in bars]
    assert len(set(patterns)) == 2 and len({trace["marker"]["color"] for trace in bars}) == 2
    most, least = bars
    assert list(most["x"]) == ["Human · human", "GPT · llm"]
    assert _numbers(most["y"]) == pytest.approx([0.50, 0.20])
    assert _numbers(most["error_y"]["array"]) == pytest.approx([0.15, 0.15])
    assert _numbers(least["error_y"]["arrayminus"]) == pytest.approx([0.04, 0.14])
    layout = figure["layout"]
    assert layout["barmode"] == "group" and layout["yaxis"]["range"] == [0, 1]
    assert layout["title"]["text"].startswith("Share of choice sets") and "95% Wilson CI" in layout["title"]["text"]
    assert layout["xaxis"]["title"]["text"] and layout["yaxis"]["title"]["text"]
    # Chance (the same for every source) is a dashed line with its own legend entry.
    assert [shape["y0"] for shape in layout["shapes"]] == [0.2]
    assert [trace["name"] for trace in figure["data"] if trace["type"] == "scatter"] == ["chance: 20%"]


def test_most_least_shares_without_choices_say_so():
    figure = charts.best_worst_shares_chart(_shares().assign(share=np.nan))
    assert figure["layout"]["annotations"][0]["text"] == "No most/least choices yet."
    unequal = charts.best_worst_shares_chart(_shares().assign(chance_share=[0.2, 0.25, 0.2, 0.25]))
    assert "shapes" not in unequal["layout"] and all(trace["type"] == "bar" for trace in unequal["data"])


def test_the_win_grid_keys_its_colours_in_a_legend_and_marks_each_cell_for_a_phone():
    win = pd.DataFrame([
        {"model": "gpt", "scenario": "S1", "winner": "fine-tuned", "zs_mean": 3.1, "ft_mean": 4.2},
        {"model": "gpt", "scenario": "S2", "winner": "zero-shot", "zs_mean": 4.0, "ft_mean": 3.5},
        {"model": "llama", "scenario": "S1", "winner": "tie", "zs_mean": 3.5, "ft_mean": 3.5},
    ])
    figure = charts.win_grid(win, baseline="zero-shot", treatment="fine-tuned")
    heatmap, *key = figure["data"]
    # The key is a legend, not the end of a title that a phone cuts off.
    assert "blue" not in figure["layout"]["title"]["text"]
    colourscale = {stop: colour for stop, colour in heatmap["colorscale"]}
    assert [(trace["name"], trace["marker"]["color"]) for trace in key] == [
        ("▼ zero-shot better", colourscale[0]), ("= tie", colourscale[0.5]), ("▲ fine-tuned better", colourscale[1])]
    assert figure["layout"]["legend"]["orientation"] == "h"
    # Each cell names its winner with its mark and means; on a phone (results.js) it shows the mark alone.
    assert heatmap["text"] == [["▲ fine-tuned<br>zero-shot 3.10 / fine-tuned 4.20",
                                "▼ zero-shot<br>zero-shot 4.00 / fine-tuned 3.50"],
                               ["= tie<br>zero-shot 3.50 / fine-tuned 3.50", ""]]
    assert heatmap["meta"]["narrow"] == {"text": [["▲", "▼"], ["=", ""]]}
    assert heatmap["customdata"] == heatmap["text"]  # what the hover shows, on a phone too


def test_the_win_grid_shows_a_row_per_system_and_dimension_when_there_are_several():
    win = pd.DataFrame([
        {"model": "gpt", "scenario": "S1", "dimension": "coherence", "winner": "fine-tuned", "zs_mean": 3.0,
         "ft_mean": 4.0},
        {"model": "gpt", "scenario": "S1", "dimension": "empathy", "winner": "zero-shot", "zs_mean": 4.5,
         "ft_mean": 3.5},
    ])
    heatmap = charts.win_grid(win, baseline="zero-shot", treatment="fine-tuned")["data"][0]
    # Each dimension's winner shows on its own row: the second dimension's result is not hidden by the first.
    assert heatmap["y"] == ["gpt · coherence", "gpt · empathy"]
    assert heatmap["z"] == [[1], [-1]]  # fine-tuned wins on coherence, zero-shot on empathy
    # One dimension: the rows are the systems alone.
    single = charts.win_grid(win[win["dimension"] == "empathy"], baseline="zero-shot", treatment="fine-tuned")
    assert single["data"][0]["y"] == ["gpt"]
