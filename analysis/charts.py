"""Figures for the results page: result table in, plotly figure dict out.

Pure functions: no database, no I/O. Each returns a JSON-ready dict with
``data`` and ``layout`` that the vendored plotly.js draws, and that kaleido
can render to PNG/SVG.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from typing import Any

import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from .regions import REGIONS, STATE_REGION

# Conditions take these colours in the study's order (baseline, treatment, references, others).
# The mark of a win-grid cell, by its winner: the baseline (-1), a tie (0) or the treatment (1).
WIN_MARKS = {-1: "▼", 0: "=", 1: "▲"}
PALETTE = ("#4c78a8", "#f58518", "#54a24b", "#b279a2", "#e45756", "#72b7b2", "#9d755d", "#bab0ac")
#: Marker shapes told apart without colour, in the order of PALETTE.
MARKERS = ("circle", "diamond", "square", "triangle-up", "x", "cross", "star", "hexagon")
TIE_COLOUR = "#eeeeee"


def condition_colours(conditions: list[str] | None) -> dict[str, str]:
    """A colour per condition, in the order given (the palette repeats past eight)."""
    return {name: PALETTE[k % len(PALETTE)] for k, name in enumerate(conditions or [])}

# Rough visual centres of the four Census regions, for the map's star.
REGION_CENTRES = {"Northeast": (-73.5, 42.8), "Midwest": (-93.0, 42.5), "South": (-87.0, 32.5), "West": (-113.0, 40.0)}


def _plain(figure: go.Figure) -> dict[str, Any]:
    return json.loads(figure.to_json())


def _empty(title: str, message: str) -> dict[str, Any]:
    figure = go.Figure()
    figure.update_layout(
        title=title, xaxis={"visible": False}, yaxis={"visible": False},
        annotations=[{"text": message, "showarrow": False, "font": {"size": 14}}],
    )
    return _plain(figure)


def rating_axis_range(table: pd.DataFrame, *, scale: tuple[float, float] | None = None) -> list[float]:
    """The y range of a chart of mean ratings: the rating scale, so bars start at its bottom, not at 0.

    ``scale`` is the study's (lowest point, highest point); without it the scale is read from the table,
    widened to whole points around every mean and interval. The top grows past the scale only when a
    t-based interval does (small n), so no error bar is cut off.
    """
    values = pd.concat([table[c] for c in ("mean", "ci_low", "ci_high") if c in table]).dropna()
    if scale is None:
        scale = (math.floor(values.min()), math.ceil(values.max()))
    low, high = float(scale[0]), float(scale[1])
    return [low, max(high, float(values.max()))]


def _mean_bars(part: pd.DataFrame, *, bottom: float, **bar: Any) -> go.Bar:
    """Bars that rise from the scale's bottom to each mean, the 95% CI as error bars.

    The mean is written inside the bar at its base, away from the error bar, and never clipped.
    """
    return go.Bar(
        x=part[bar.pop("x_column")].astype(str), y=part["mean"] - bottom, base=bottom, customdata=part["mean"],
        text=part["mean"].map(lambda m: f"{m:.2f}"), textposition="inside", insidetextanchor="start",
        textangle=0, cliponaxis=False, hovertemplate="%{x}: mean %{customdata:.2f}<extra>%{fullData.name}</extra>",
        error_y={"type": "data", "symmetric": False, "array": part["ci_high"] - part["mean"],
                 "arrayminus": part["mean"] - part["ci_low"]},
        **bar,
    )


def rating_means_by_scenario(descriptives: pd.DataFrame, *, dimension: str | None = None,
                             scale: tuple[float, float] | None = None,
                             scenario_labels: dict[str, str] | None = None,
                             conditions: list[str] | None = None) -> dict[str, Any]:
    """The paper's Figure 2: one panel per scenario, each condition per system, means annotated.

    Panels are titled with the scenario's label (``scenario_labels``: key -> label), the key when it has none.
    """
    table = descriptives.dropna(subset=["mean"])
    if dimension is not None and "dimension" in table:
        table = table[table["dimension"] == dimension]
    if table.empty:
        return _empty("Mean rating by system and condition", "No ratings to show yet.")
    scenarios = sorted(table["scenario"].unique())
    labels = scenario_labels or {}
    titles = [labels.get(s) or str(s) for s in scenarios]
    y_range = rating_axis_range(table, scale=scale)
    colours = condition_colours(list(conditions or []) + sorted(set(table["condition"]) - set(conditions or [])))
    # Pixels: room between panels for the system names, which plotly turns upright on a phone.
    panel, gap, top, bottom = 240, 170, 110, 170
    height = len(scenarios) * panel + (len(scenarios) - 1) * gap + top + bottom
    plot_height = height - top - bottom
    figure = make_subplots(rows=len(scenarios), cols=1, subplot_titles=titles, shared_xaxes=False,
                           vertical_spacing=gap / plot_height)
    for row, scenario in enumerate(scenarios, start=1):
        panel = table[table["scenario"] == scenario]
        for condition in panel["condition"].unique():
            part = panel[panel["condition"] == condition]
            figure.add_trace(
                _mean_bars(part, bottom=y_range[0], x_column="model", name=condition, legendgroup=condition,
                           showlegend=row == 1, marker_color=colours.get(condition)),
                row=row, col=1,
            )
    # The legend sits between the title and the first panel's title, above both and over neither.
    figure.update_layout(barmode="group", height=height, title="Mean rating (95% CI) by system and condition",
                         margin={"t": top, "b": bottom},
                         legend={"orientation": "h", "y": 1 + 28 / plot_height, "yanchor": "bottom", "x": 0})
    figure.update_yaxes(title_text="mean rating", range=y_range)
    return _plain(figure)


def _mean_text(value: Any) -> str:
    return f"{value:.2f}" if isinstance(value, (int, float)) and math.isfinite(value) else "–"


def win_grid(win: pd.DataFrame, *, baseline: str, treatment: str) -> dict[str, Any]:
    """The paper's Table 4 as a coloured grid: rows systems, columns scenarios; baseline vs treatment."""
    table = win.dropna(subset=["winner"])
    table = table[table["winner"] != ""]
    title = f"{baseline} vs {treatment}: winner per system and scenario"
    if table.empty:
        return _empty(title, "No decided comparison yet.")
    codes = {baseline: -1, "tie": 0, treatment: 1}
    colours = {-1: PALETTE[0], 0: TIE_COLOUR, 1: PALETTE[1]}
    # Several rating dimensions: one row per system x dimension, so every dimension's winners show.
    dimensions = table["dimension"].dropna().astype(str) if "dimension" in table.columns else pd.Series(dtype=str)
    if dimensions.nunique() > 1:
        table = table.assign(model=table["model"].astype(str) + " · " + dimensions)
    models = sorted(table["model"].unique())
    scenarios = sorted(table["scenario"].unique())
    cells = table.set_index(["model", "scenario"])
    z, text, marks = [], [], []
    for model in models:
        z_row, text_row, mark_row = [], [], []
        for scenario in scenarios:
            if (model, scenario) in cells.index:
                cell = cells.loc[(model, scenario)]
                code = codes.get(cell["winner"], 0)
                z_row.append(code)
                mark_row.append(WIN_MARKS[code])
                text_row.append(f"{WIN_MARKS[code]} {cell['winner']}<br>{baseline} {_mean_text(cell['zs_mean'])}"
                                f" / {treatment} {_mean_text(cell['ft_mean'])}")
            else:
                z_row.append(None)
                text_row.append("")
                mark_row.append("")
        z.append(z_row)
        text.append(text_row)
        marks.append(mark_row)
    figure = go.Figure(
        go.Heatmap(
            z=z, x=scenarios, y=models, text=text, customdata=text, texttemplate="%{text}", zmin=-1, zmax=1,
            showscale=False, colorscale=[[0, colours[-1]], [0.5, colours[0]], [1, colours[1]]],
            hovertemplate="%{y} in %{x}: %{customdata}<extra></extra>",
            # On a phone a cell is too narrow for the winner and the means: it shows the winner's mark
            # (static/js/results.js), the legend says what each mark means, the hover gives the rest.
            meta={"narrow": {"text": marks}},
        )
    )
    # The colour key is a legend (it wraps on a narrow screen; a title is cut off there), and each
    # cell also carries its winner's mark, so the colour is never the only cue.
    for code, name in ((-1, f"{baseline} better"), (0, "tie"), (1, f"{treatment} better")):
        figure.add_trace(go.Scatter(x=[None], y=[None], mode="markers", name=f"{WIN_MARKS[code]} {name}",
                                    marker={"symbol": "square", "size": 14, "color": colours[code]},
                                    hoverinfo="skip"))
    figure.update_layout(title=title, height=150 + 45 * len(models), margin={"t": 110},
                         legend={"orientation": "h", "y": 1.0, "yanchor": "bottom", "x": 0})
    figure.update_yaxes(automargin=True)
    return _plain(figure)


def regional_map(region_means: pd.DataFrame, *, scenario: str, level: str = "participant") -> dict[str, Any]:
    """The paper's Figure 3 for one scenario: states coloured by their Census region's mean, a star on the top region.

    The star says "not significant" when the top region's lead is within the noise.
    """
    table = region_means[(region_means["scenario"] == scenario) & (region_means["level"] == level)].dropna(subset=["mean"])
    if table.empty:
        return _empty(f"{scenario}: mean rating by US region", "Not enough participants with a US state.")
    means = dict(zip(table["region"], table["mean"]))
    states = [s for s, r in STATE_REGION.items() if r in means]
    figure = go.Figure(
        go.Choropleth(
            locations=states, locationmode="USA-states", z=[means[STATE_REGION[s]] for s in states],
            text=[STATE_REGION[s] for s in states], colorscale="Viridis", colorbar={"title": "mean"},
            hovertemplate="%{location} (%{text}): %{z:.2f}<extra></extra>",
        )
    )
    top = table[table["is_top"].astype(bool)]
    if not top.empty:
        top_row = top.iloc[0]
        lon, lat = REGION_CENTRES[top_row["region"]]
        significant = bool(top_row["top_significant"])
        label = f"★ {top_row['region']}" + ("" if significant else " (not significant)")
        figure.add_trace(go.Scattergeo(lon=[lon], lat=[lat], mode="text", text=[label], textfont={"size": 18},
                                       hoverinfo="skip", showlegend=False))
    figure.update_layout(title=f"{scenario}: mean rating by US Census region ({level} level)", geo={"scope": "usa"},
                         height=420, margin={"l": 0, "r": 0, "t": 50, "b": 0})
    return _plain(figure)


def position_bias_chart(position_bias: pd.DataFrame, *, scale: tuple[float, float] | None = None) -> dict[str, Any]:
    table = position_bias.dropna(subset=["mean"])
    if table.empty:
        return _empty("Mean rating by display position", "No ratings yet.")
    p_value = table["p"].dropna()
    subtitle = f" (flatness test p = {p_value.iloc[0]:.3g})" if not p_value.empty else ""
    y_range = rating_axis_range(table, scale=scale)
    figure = go.Figure(_mean_bars(table, bottom=y_range[0], x_column="position", name="mean rating",
                                  marker_color=PALETTE[0]))
    figure.update_layout(title="Mean rating (95% CI) by display position" + subtitle, xaxis_title="position",
                         yaxis_title="mean rating", yaxis_range=y_range, height=360)
    return _plain(figure)


# The two picks of a best-worst task: bar colour, hatching (so the bars differ without colour) and legend label.
CHOICE_STYLES = {
    "most": {"color": PALETTE[0], "pattern": "", "label": "picked most"},
    "least": {"color": PALETTE[4], "pattern": "/", "label": "picked least"},
}


def best_worst_shares_chart(shares: pd.DataFrame) -> dict[str, Any]:
    """Per source, the share of its choice sets in which it was picked most and least, Wilson 95% CIs as error bars.

    The bars of the two picks differ by hatching as well as by colour (the legend shows both); a dashed line
    marks the share expected by chance when it is the same for every source.
    """
    table = shares.dropna(subset=["share"])
    title = "Share of choice sets in which each source was picked most and least (95% Wilson CI)"
    if table.empty:
        return _empty(title, "No most/least choices yet.")
    table = table.assign(source=table["model"].astype(str) + " · " + table["condition"].fillna("").astype(str))
    figure = go.Figure()
    for choice, style in CHOICE_STYLES.items():
        part = table[table["choice"] == choice]
        figure.add_trace(go.Bar(
            x=part["source"], y=part["share"], name=style["label"],
            marker={"color": style["color"], "pattern": {"shape": style["pattern"]}},
            customdata=part[["count", "n_sets"]].to_numpy(),
            hovertemplate="%{x}: " + style["label"] + " in %{customdata[0]} of %{customdata[1]} sets "
                          "(%{y:.1%})<extra></extra>",
            error_y={"type": "data", "symmetric": False, "array": part["ci_high"] - part["share"],
                     "arrayminus": part["share"] - part["ci_low"]},
        ))
    chance = table["chance_share"].dropna().round(9).unique()
    if len(chance) == 1:
        line = {"dash": "dash", "color": "#555555"}
        figure.add_hline(y=float(chance[0]), line=line)
        # A legend entry for the line: a label on the plot would sit on some source's bars.
        figure.add_trace(go.Scatter(x=[None], y=[None], mode="lines", line=line, name=f"chance: {chance[0]:.0%}"))
    figure.update_layout(title=title, barmode="group", height=420, xaxis_title="source (system · condition)",
                         yaxis_title="share of the choice sets showing the source", yaxis_range=[0, 1],
                         yaxis_tickformat=".0%", legend={"orientation": "h", "y": 1.02, "yanchor": "bottom", "x": 0})
    return _plain(figure)


def strength_title(method: str | None) -> str:
    """A sentence from the table's ``method`` ("<model>, <interval>"), e.g.
    "Plackett-Luce (MM) strength (log worth) per system, 95% CI by percentile bootstrap over participants"."""
    model, _, interval = (method or "Plackett-Luce").partition(", ")
    return f"{model} strength (log worth) per system, 95% CI" + (f" by {interval}" if interval else "")


def strength_chart(bradley_terry: pd.DataFrame) -> dict[str, Any]:
    table = bradley_terry.dropna(subset=["strength"])
    if table.empty:
        return _empty("Ranking strength", "No rankings yet.")
    table = table.sort_values("strength")
    labels = table["model"] + " · " + table["condition"].fillna("")
    figure = go.Figure(
        go.Scatter(x=table["strength"], y=labels, mode="markers",
                   error_x={"type": "data", "symmetric": False, "array": table["ci_high"] - table["strength"],
                            "arrayminus": table["strength"] - table["ci_low"]})
    )
    method = table["method"].dropna().iloc[0] if "method" in table and table["method"].notna().any() else None
    figure.update_layout(title=strength_title(method), height=140 + 22 * len(table),
                         xaxis_title="strength", margin={"l": 260})
    return _plain(figure)


def pairwise_strength_chart(strengths: pd.DataFrame) -> dict[str, Any]:
    """Bradley-Terry strengths of the pairwise judgements with their bootstrap 95% CIs: the conditions, then the
    sources (system · condition), each sorted by strength; a dashed line at 0, the anchor (the baseline, or the
    mean when the study names none)."""
    table = strengths.dropna(subset=["strength"])
    anchor = table["anchor"].dropna().iloc[0] if not table.empty and table["anchor"].notna().any() else "mean 0"
    title = f"Bradley-Terry strength (log scale, {anchor}) from the pairwise judgements, 95% bootstrap CI"
    if table.empty:
        return _empty(title, "No decisive pairwise judgements yet.")
    figure = go.Figure()
    for k, (level, name) in enumerate((("condition", "condition"), ("source", "source (system · condition)"))):
        part = table[table["level"] == level].sort_values("strength")
        if part.empty:
            continue
        labels = part["condition"].astype(str) if level == "condition" else (
            part["model"].astype(str) + " · " + part["condition"].astype(str))
        figure.add_trace(go.Scatter(
            x=part["strength"], y=labels, mode="markers", name=name,
            marker={"color": PALETTE[k], "symbol": ("diamond", "circle")[k], "size": 9},
            customdata=part[["p_beats_baseline", "decisive"]].to_numpy(),
            hovertemplate="%{y}: strength %{x:.2f}, %{customdata[1]} decisive judgements<extra></extra>",
            error_x={"type": "data", "symmetric": False, "array": part["ci_high"] - part["strength"],
                     "arrayminus": part["strength"] - part["ci_low"]},
        ))
    figure.add_vline(x=0, line={"dash": "dash", "color": "#555555"})
    figure.update_layout(title=title, height=160 + 24 * len(table), xaxis_title="log strength",
                         margin={"l": 260}, legend={"orientation": "h", "y": 1.02, "yanchor": "bottom", "x": 0})
    return _plain(figure)


def region_bars(region_means: pd.DataFrame, *, scenario: str, level: str = "participant") -> dict[str, Any]:
    """Mean rating per region of one scenario as bars with 95% CIs: the figure for a study's own region map."""
    table = region_means[(region_means["scenario"] == scenario) & (region_means["level"] == level)].dropna(subset=["mean"])
    title = f"{scenario}: mean rating (95% CI) by region ({level} level)"
    if table.empty:
        return _empty(title, "Not enough participants with a region.")
    y_range = rating_axis_range(table)
    figure = go.Figure(_mean_bars(table, bottom=y_range[0], x_column="region", name="mean rating",
                                  marker_color=PALETTE[0]))
    figure.update_layout(title=title, xaxis_title="region", yaxis_title="mean rating", yaxis_range=y_range, height=360)
    return _plain(figure)


def _region_maps(region_means: pd.DataFrame, *, us_map: bool = True) -> dict[str, dict[str, Any]]:
    draw = regional_map if us_map else region_bars
    return {f"map_{scenario}": draw(region_means, scenario=scenario)
            for scenario in sorted(region_means["scenario"].dropna().unique())}


# ------------------------------------------------------------------ the "Judges" section


def judge_agreement_chart(agreement: pd.DataFrame) -> dict[str, Any]:
    """Each judge's correlations with the people's mean per response (95% CI), one marker per method."""
    table = agreement[(agreement["level"] == "response")].dropna(subset=["estimate"])
    if table.empty:
        return _empty("Judges against the people", "No judge rated the responses people rated.")
    figure = go.Figure()
    for k, (method, part) in enumerate(table.groupby("method", sort=True)):
        labels = part["judge"].astype(str) + " (" + part["kind"].astype(str) + ") · " + part["dimension"].astype(str)
        figure.add_trace(go.Scatter(
            x=part["estimate"], y=labels, mode="markers", name=method, marker_color=PALETTE[k % len(PALETTE)],
            error_x={"type": "data", "symmetric": False, "array": part["ci_high"] - part["estimate"],
                     "arrayminus": part["estimate"] - part["ci_low"]}))
    figure.update_layout(title="Judges against the people's mean per response (95% bootstrap CI)",
                         xaxis_title="correlation", xaxis_range=[-1, 1], margin={"l": 260},
                         height=160 + 26 * table[["judge", "dimension"]].drop_duplicates().shape[0])
    return _plain(figure)


def judge_levels_chart(agreement: pd.DataFrame) -> dict[str, Any]:
    """Each judge beyond single responses: the systems' order and winner, Krippendorff's alpha with and without
    it, its kappa with the people's majority, its left share and order consistency (95% CI where there is one)."""
    table = agreement[agreement["level"] != "response"].dropna(subset=["estimate"])
    if table.empty:
        return _empty("Judges at the system, rater, pair and position levels",
                      "No judge answered enough for these measures.")
    figure = go.Figure()
    for k, (method, part) in enumerate(table.groupby("method", sort=True)):
        dimension = part["dimension"].fillna("").astype(str)
        labels = (part["judge"].astype(str) + " (" + part["kind"].astype(str) + ") · " + part["level"].astype(str)
                  + dimension.map(lambda d: f" · {d}" if d else ""))
        figure.add_trace(go.Scatter(
            x=part["estimate"], y=labels, mode="markers", name=method, marker_color=PALETTE[k % len(PALETTE)],
            marker_symbol=MARKERS[k % len(MARKERS)],
            error_x={"type": "data", "symmetric": False, "array": (part["ci_high"] - part["estimate"]).fillna(0),
                     "arrayminus": (part["estimate"] - part["ci_low"]).fillna(0)}))
    rows = table[["judge", "kind", "level", "dimension"]].drop_duplicates().shape[0]
    figure.update_layout(title="Judges at the system, rater, pair and position levels (95% CI where there is one)",
                         xaxis_title="estimate (Kendall tau, share, alpha, kappa)", xaxis_range=[-1, 1],
                         margin={"l": 300}, height=160 + 26 * rows)
    return _plain(figure)


def judge_loo_chart(loo: pd.DataFrame) -> dict[str, Any]:
    """Every person's and judge's correlation with the others' mean: are the judges among the people?"""
    table = loo.dropna(subset=["spearman_r"])
    if table.empty:
        return _empty("Each rater against the people", "Too few shared ratings.")
    people = table["rater_kind"] == "person"
    figure = go.Figure([
        go.Box(x=table.loc[people, "spearman_r"], y=table.loc[people, "dimension"], name="people",
               orientation="h", boxpoints="all", marker_color=PALETTE[0]),
        go.Scatter(x=table.loc[~people, "spearman_r"], y=table.loc[~people, "dimension"], mode="markers+text",
                   text=table.loc[~people, "rater"], textposition="top center", name="judges",
                   marker={"color": PALETTE[1], "size": 11, "symbol": "diamond"}),
    ])
    figure.update_layout(title="Spearman correlation with the people's mean (leave-one-out)",
                         xaxis_title="Spearman r", height=360)
    return _plain(figure)


# Figure key (as declared in analysis.registry) -> the function drawing it from its table and the study's
# context (``FigureContext``). A key ending in "_" draws several figures, keyed by that prefix.
DRAWERS = {
    "rating_means": lambda table, **context: {"rating_means": rating_means_by_scenario(
        table, scale=context.get("scale"), scenario_labels=context.get("scenario_labels"),
        conditions=context.get("conditions"))},
    "win_grid": lambda table, **context: {"win_grid": win_grid(
        table, baseline=context.get("baseline") or "baseline", treatment=context.get("treatment") or "treatment")},
    "map_": lambda table, **context: _region_maps(table, us_map=context.get("us_map", True)),
    "position_bias": lambda table, **context: {"position_bias": position_bias_chart(table, scale=context.get("scale"))},
    "strength": lambda table, **context: {"strength": strength_chart(table)},
    "best_worst_shares": lambda table, **context: {"best_worst_shares": best_worst_shares_chart(table)},
    "pairwise_strength": lambda table, **context: {"pairwise_strength": pairwise_strength_chart(table)},
    "judge_agreement": lambda table, **context: {"judge_agreement": judge_agreement_chart(table)},
    "judge_levels": lambda table, **context: {"judge_levels": judge_levels_chart(table)},
    "judge_loo": lambda table, **context: {"judge_loo": judge_loo_chart(table)},
}


def results_figures(tables: dict[str, pd.DataFrame], figure_sources: list[tuple[str, str]],
                    **context: Any) -> dict[str, dict[str, Any]]:
    """Every figure the results page shows, keyed by a stable id.

    ``figure_sources`` lists (figure key, table name) in page order (the registry's ``figure_sources()``).
    ``context`` comes from the study, so the charts stay free of the database: ``scale`` (the rating
    scale's lowest and highest point), ``scenario_labels`` (key -> label), ``conditions`` (in colour
    order), ``baseline`` and ``treatment``, and ``us_map`` (regions are US Census regions).
    """
    figures: dict[str, dict[str, Any]] = {}
    for key, table_name in figure_sources:
        if table_name in tables:
            figures.update(DRAWERS[key](tables[table_name], **context))
    return figures


#: Significant digits of the numbers a page sends to plotly.js: far below a pixel, and ~3x shorter.
PAGE_DIGITS = 6


def page_payload(figures: Mapping[str, dict[str, Any]]) -> tuple[dict[str, dict[str, Any]], dict[str, Any] | None]:
    """The figures as a page sends them: plotly's layout template once for all, numbers to ``PAGE_DIGITS`` digits.

    plotly.py writes its whole default template (about 7 KB) into every
    figure; the page sends it once (the second item, None when no figure has
    one) and its script puts it back into each layout before drawing.

    Examples
    --------
    >>> figures, template = page_payload({"a": {"data": [{"y": [3.342857142857143]}],
    ...                                          "layout": {"template": {"layout": {}}, "title": "A"}}})
    >>> figures, template
    ({'a': {'data': [{'y': [3.34286]}], 'layout': {'title': 'A'}}}, {'layout': {}})
    """
    templates = [figure["layout"].get("template") for figure in figures.values()]
    shared = templates[0] if templates and all(t == templates[0] for t in templates) else None
    compact = {}
    for key, figure in figures.items():
        layout = figure["layout"]
        if shared is not None:
            layout = {name: value for name, value in layout.items() if name != "template"}
        compact[key] = _rounded({**figure, "layout": layout})
    return compact, shared


def _rounded(value: Any) -> Any:
    if isinstance(value, float):
        return float(f"{value:.{PAGE_DIGITS}g}") if math.isfinite(value) else value
    if isinstance(value, dict):
        return {key: _rounded(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_rounded(item) for item in value]
    return value


METRIC_LABELS = {"embedding_cosine": "Embedding cosine", "bertscore_f1": "BERTScore F1", "rouge_l": "ROUGE-L",
                 "meteor": "METEOR"}


def metric_scatter(per_response: pd.DataFrame, metric: str, agreement: pd.DataFrame | None = None) -> dict[str, Any]:
    """One automatic metric against the mean human rating, one point per response, coloured by condition."""
    label = METRIC_LABELS.get(metric, metric)
    table = per_response.dropna(subset=[metric, "mean_rating"])
    if table.empty:
        return _empty(f"{label} vs mean human rating", "No rated response has a reference to compare with.")
    figure = go.Figure()
    colours = condition_colours(sorted(table["condition"].dropna().unique()))
    for condition, part in table.groupby("condition", sort=True):
        figure.add_trace(go.Scatter(
            x=part[metric], y=part["mean_rating"], mode="markers", name=str(condition),
            marker={"color": colours.get(condition), "size": 8, "opacity": 0.8},
            text=part["response_id"] + " · " + part["model"].astype(str),
            hovertemplate="%{text}<br>" + label + " %{x:.3f}<br>mean rating %{y:.2f}<extra></extra>",
        ))
    title = f"{label} vs mean human rating"
    if agreement is not None and not agreement.empty:
        row = agreement[(agreement["model"] == "all") & (agreement["metric"] == metric) & (agreement["method"] == "spearman")]
        if len(row) and pd.notna(row["r"].iloc[0]):
            r = row.iloc[0]
            title += f" (Spearman {r['r']:.2f}, 95% CI {r['ci_low']:.2f} to {r['ci_high']:.2f}, n = {int(r['n'])})"
    figure.update_layout(title=title, xaxis_title=label, yaxis_title="mean human rating", height=380)
    return _plain(figure)


def metrics_figures(tables: dict[str, pd.DataFrame]) -> dict[str, dict[str, Any]]:
    """The scatter of every reference metric against the mean human rating, keyed ``metric_<name>``."""
    per_response = tables.get("per_response")
    if per_response is None:
        return {}
    agreement = tables.get("metric_agreement")
    return {f"metric_{m}": metric_scatter(per_response, m, agreement) for m in METRIC_LABELS if m in per_response}


__all__ = [
    "rating_axis_range", "rating_means_by_scenario", "win_grid", "regional_map", "region_bars", "position_bias_chart",
    "strength_chart", "strength_title", "results_figures", "metric_scatter", "metrics_figures", "REGIONS",
    "best_worst_shares_chart", "pairwise_strength_chart", "judge_agreement_chart", "judge_loo_chart",
]
