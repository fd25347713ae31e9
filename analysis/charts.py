"""Figures for the results page: result table in, plotly figure dict out.

Pure functions: no database, no I/O. Each returns a JSON-ready dict with
``data`` and ``layout`` that the vendored plotly.js draws, and that kaleido
can render to PNG/SVG.
"""

from __future__ import annotations

import json
from typing import Any

import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from .regions import REGIONS, STATE_REGION

CONDITION_COLOURS = {"zero-shot": "#4c78a8", "fine-tuned": "#f58518", "reference": "#54a24b"}
WINNER_CODES = {"zero-shot": -1, "tie": 0, "fine-tuned": 1}
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


def rating_means_by_scenario(descriptives: pd.DataFrame, *, dimension: str | None = None) -> dict[str, Any]:
    """The paper's Figure 2: one panel per scenario, ZS vs FT vs reference per system, means annotated."""
    table = descriptives.dropna(subset=["mean"])
    if dimension is not None and "dimension" in table:
        table = table[table["dimension"] == dimension]
    if table.empty:
        return _empty("Mean rating by system and condition", "No ratings to show yet.")
    scenarios = sorted(table["scenario"].unique())
    figure = make_subplots(rows=len(scenarios), cols=1, subplot_titles=scenarios, shared_xaxes=False, vertical_spacing=0.07)
    for row, scenario in enumerate(scenarios, start=1):
        panel = table[table["scenario"] == scenario]
        for condition in panel["condition"].unique():
            part = panel[panel["condition"] == condition]
            figure.add_trace(
                go.Bar(
                    x=part["model"], y=part["mean"], name=condition, legendgroup=condition, showlegend=row == 1,
                    marker_color=CONDITION_COLOURS.get(condition), text=part["mean"].round(2), textposition="outside",
                    error_y={"type": "data", "symmetric": False, "array": part["ci_high"] - part["mean"],
                             "arrayminus": part["mean"] - part["ci_low"]},
                ),
                row=row, col=1,
            )
    figure.update_layout(barmode="group", height=320 * len(scenarios), title="Mean rating (95% CI) by system and condition")
    figure.update_yaxes(title_text="mean rating")
    return _plain(figure)


def win_grid(win: pd.DataFrame) -> dict[str, Any]:
    """The paper's Table 4 as a coloured grid: rows systems, columns scenarios."""
    table = win.dropna(subset=["winner"])
    if table.empty:
        return _empty("Zero-shot vs fine-tuned winner", "No win table yet.")
    models = sorted(table["model"].unique())
    scenarios = sorted(table["scenario"].unique())
    cells = table.set_index(["model", "scenario"])
    z, text = [], []
    for model in models:
        z_row, text_row = [], []
        for scenario in scenarios:
            if (model, scenario) in cells.index:
                cell = cells.loc[(model, scenario)]
                z_row.append(WINNER_CODES.get(cell["winner"], 0))
                text_row.append(f"{cell['winner']}<br>ZS {cell['zs_mean']:.2f} / FT {cell['ft_mean']:.2f}")
            else:
                z_row.append(None)
                text_row.append("")
        z.append(z_row)
        text.append(text_row)
    figure = go.Figure(
        go.Heatmap(
            z=z, x=scenarios, y=models, text=text, texttemplate="%{text}", zmin=-1, zmax=1, showscale=False,
            colorscale=[[0, CONDITION_COLOURS["zero-shot"]], [0.5, "#eeeeee"], [1, CONDITION_COLOURS["fine-tuned"]]],
            hovertemplate="%{y} in %{x}: %{text}<extra></extra>",
        )
    )
    figure.update_layout(title="Winner per system and scenario (blue: zero-shot, orange: fine-tuned)",
                         height=120 + 45 * len(models))
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


def position_bias_chart(position_bias: pd.DataFrame) -> dict[str, Any]:
    table = position_bias.dropna(subset=["mean"])
    if table.empty:
        return _empty("Mean rating by display position", "No ratings yet.")
    p_value = table["p"].dropna()
    subtitle = f" (flatness test p = {p_value.iloc[0]:.3g})" if not p_value.empty else ""
    figure = go.Figure(
        go.Bar(x=table["position"].astype(str), y=table["mean"],
               error_y={"type": "data", "symmetric": False, "array": table["ci_high"] - table["mean"],
                        "arrayminus": table["mean"] - table["ci_low"]})
    )
    figure.update_layout(title="Mean rating by display position" + subtitle, xaxis_title="position", yaxis_title="mean rating", height=360)
    return _plain(figure)


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
    method = table["method"].iloc[0] if "method" in table else "Plackett-Luce"
    figure.update_layout(title=f"{method} strength (log worth, bootstrap 95% CI)", height=140 + 22 * len(table),
                         xaxis_title="strength", margin={"l": 260})
    return _plain(figure)


def _region_maps(region_means: pd.DataFrame) -> dict[str, dict[str, Any]]:
    return {f"map_{scenario}": regional_map(region_means, scenario=scenario)
            for scenario in sorted(region_means["scenario"].dropna().unique())}


# Figure key (as declared in analysis.registry) -> the function drawing it from its table.
# A key ending in "_" draws several figures, keyed by that prefix.
DRAWERS = {
    "rating_means": lambda table: {"rating_means": rating_means_by_scenario(table)},
    "win_grid": lambda table: {"win_grid": win_grid(table)},
    "map_": _region_maps,
    "position_bias": lambda table: {"position_bias": position_bias_chart(table)},
    "strength": lambda table: {"strength": strength_chart(table)},
}


def results_figures(tables: dict[str, pd.DataFrame], figure_sources: list[tuple[str, str]]) -> dict[str, dict[str, Any]]:
    """Every figure the results page shows, keyed by a stable id.

    ``figure_sources`` lists (figure key, table name) in page order (the registry's ``figure_sources()``).
    """
    figures: dict[str, dict[str, Any]] = {}
    for key, table_name in figure_sources:
        if table_name in tables:
            figures.update(DRAWERS[key](tables[table_name]))
    return figures


METRIC_LABELS = {"embedding_cosine": "Embedding cosine", "bertscore_f1": "BERTScore F1", "rouge_l": "ROUGE-L",
                 "meteor": "METEOR"}


def metric_scatter(per_response: pd.DataFrame, metric: str, agreement: pd.DataFrame | None = None) -> dict[str, Any]:
    """One automatic metric against the mean human rating, one point per response, coloured by condition."""
    label = METRIC_LABELS.get(metric, metric)
    table = per_response.dropna(subset=[metric, "mean_rating"])
    if table.empty:
        return _empty(f"{label} vs mean human rating", "No rated response has a reference to compare with.")
    figure = go.Figure()
    for condition, part in table.groupby("condition", sort=True):
        figure.add_trace(go.Scatter(
            x=part[metric], y=part["mean_rating"], mode="markers", name=str(condition),
            marker={"color": CONDITION_COLOURS.get(condition), "size": 8, "opacity": 0.8},
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
    "rating_means_by_scenario", "win_grid", "regional_map", "position_bias_chart", "strength_chart",
    "results_figures", "metric_scatter", "metrics_figures", "REGIONS",
]
