"""Time the analysis path on a large generated TIDE study (issue 5), next to a plain pandas/scipy floor.

Steps: generate DESIGN 3.1 CSVs (bench/generate.py), import them into the
TIDE study (``responses_import`` + ``gold_import``), build the frames,
apply the quality rules, run every analysis of ``registry.ANALYSES`` on the
retained participants plus the sensitivity variants and the rater-judge
agreement (what ``pipeline.compute_statistics`` runs). Each step prints its
wall time and peak memory. The floor does the paper's path directly on
in-memory frames: read the CSVs with pandas, the quality rules, win table,
Welch t-tests and one-way ANOVA with pandas groupby + scipy.stats; its
results are checked against the platform's.

Peak memory is the high-water RSS of the process during the step (VmHWM,
reset before each step through /proc/self/clear_refs) minus the RSS at its
start: what the step needed on top of what was already held.

Usage::

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/hev_bench python bench/bench_analysis.py
    DATABASE_URL=... python bench/bench_analysis.py --participants 500          # smoke check
    DATABASE_URL=... python bench/bench_analysis.py --keep                      # reuse the last import
    DATABASE_URL=... python bench/bench_analysis.py --fk-triggers both          # import with and without
    DATABASE_URL=sqlite:////tmp/hev_bench.sqlite3 python bench/bench_analysis.py
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
import warnings
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from scipy import stats as sps

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench import generate  # noqa: E402

PAPER = ("win_table", "ttests", "anova")
IMPORT_TARGET_S = 30.0
PAPER_TARGET_S = 10.0
PAPER_MAX_RATIO = 2.0
# Frame build may instantiate a handful of objects (the study); never one per row.
ORM_OBJECTS_MAX = 100


# ---------------------------------------------------------------- measuring


def _status_kb(field_name: str) -> int:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith(field_name + ":"):
                return int(line.split()[1])
    return 0


_TICK = os.sysconf("SC_CLK_TCK")
SERVER_PID: list[int] = []  # the database backend serving this process, when on this machine


def _stat_fields(pid: int | str) -> list[str]:
    with open(f"/proc/{pid}/stat") as stat:
        return stat.read().rsplit(")", 1)[1].split()


def _server_cpu(backend: int) -> float:
    """CPU seconds of the whole PostgreSQL server the backend belongs to.

    Every process of the postmaster (backends of this and of the helper
    connections the frame build opens, parallel workers, the checkpointer)
    plus, through the postmaster's cutime/cstime, those that already exited.
    """
    postmaster = int(_stat_fields(backend)[1])
    fields = _stat_fields(postmaster)
    total = sum(int(fields[i]) for i in (11, 12, 13, 14))  # utime, stime, cutime, cstime
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                child = _stat_fields(entry)
            except (OSError, IndexError):
                continue
            if child[1] == str(postmaster):
                total += int(child[11]) + int(child[12])
    return total / _TICK


def cpu_seconds() -> float:
    """CPU time of this process plus the PostgreSQL server's: wall time minus the wait for other jobs' cores."""
    times = os.times()
    total = times.user + times.system
    for pid in SERVER_PID:
        try:
            total += _server_cpu(pid)
        except (OSError, IndexError, ValueError):
            pass
    return total


def _reset_peak() -> bool:
    try:
        with open("/proc/self/clear_refs", "w") as clear:
            clear.write("5")  # resets VmHWM to the current RSS (Linux >= 4.0)
        return True
    except OSError:
        return False


@dataclass
class Step:
    name: str
    seconds: float
    peak_mb: float
    cpu: float = 0.0
    rss_mb: float = 0.0
    floor_seconds: float | None = None
    note: str = ""


@dataclass
class Report:
    steps: list[Step] = field(default_factory=list)

    @contextmanager
    def step(self, name: str, note: str = ""):
        record = Step(name, 0.0, 0.0, note=note)
        before = _status_kb("VmRSS")
        exact = _reset_peak()
        began, cpu = time.perf_counter(), cpu_seconds()
        try:
            yield record
        finally:
            record.seconds = time.perf_counter() - began
            record.cpu = cpu_seconds() - cpu
            peak = _status_kb("VmHWM") if exact else max(before, _status_kb("VmRSS"))
            record.peak_mb = max(peak - before, 0) / 1024
            record.rss_mb = peak / 1024
            self.steps.append(record)
            print(f"  {name:<44} {record.seconds:8.2f} s (cpu {record.cpu:6.2f})  peak RSS {record.rss_mb:6.0f} MB (+{record.peak_mb:5.0f})  "
                  f"{record.note}", flush=True)

    def get(self, name: str) -> Step:
        return next(s for s in self.steps if s.name == name)


def load() -> str:
    return "{:.2f} {:.2f} {:.2f}".format(*os.getloadavg())


# ---------------------------------------------------------------- database side


def setup_django() -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    import django

    django.setup()
    from django.core.management import call_command
    from django.db import OperationalError, connection

    try:
        connection.ensure_connection()
    except OperationalError:
        if connection.vendor != "postgresql":
            raise
        # A first run on this machine: create the benchmark database (it is not the product's).
        with connection._nodb_cursor() as cursor:
            cursor.execute(f"CREATE DATABASE {connection.ops.quote_name(connection.settings_dict['NAME'])}")

    call_command("migrate", verbosity=0)


def tide_study():
    from django.db import transaction

    from surveys.definition import parse_definition, read_definition_file
    from surveys.loader import study_load

    with transaction.atomic():
        return study_load(definition=parse_definition(read_definition_file(ROOT / "fixtures" / "tide.json"))).study


def clear_participants(study) -> None:
    """Remove every participant row (and what hangs off it) of the bench database."""
    from django.apps import apps
    from django.db import connection, transaction

    from surveys.models import Participant

    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute(f"TRUNCATE {connection.ops.quote_name(Participant._meta.db_table)} CASCADE")
        return
    # SQLite: the ORM's cascade would load millions of rows; delete table by table, children first.
    from surveys.models import BlockVisit, ItemPlacement, Rating

    with transaction.atomic(), connection.cursor() as cursor:
        children = [m for m in apps.get_models() if m not in (Participant, BlockVisit, ItemPlacement, Rating)
                    and any(f.related_model in (Participant, BlockVisit, ItemPlacement) for f in m._meta.fields
                            if f.is_relation)]
        for model in [*children, Rating, ItemPlacement, BlockVisit, Participant]:
            cursor.execute(f"DELETE FROM {connection.ops.quote_name(model._meta.db_table)}")


def run_import(report: Report, study, paths: dict[str, Path], fk_triggers: str) -> None:
    from analysis.imports import import_writer, importers

    original = import_writer.skip_foreign_key_triggers
    label = "import (responses_import)"
    if fk_triggers == "checked":
        import_writer.skip_foreign_key_triggers = lambda: False
        label += ", FK triggers on"
    try:
        with paths["participants"].open("rb") as p_file, paths["ratings"].open("rb") as r_file, \
                report.step(label) as step:
            result = importers.responses_import(study=study, participants_file=p_file, ratings_file=r_file)
            step.note = f"{result.participants_created} participants, {result.ratings_created} ratings"
    finally:
        import_writer.skip_foreign_key_triggers = original


def platform(report: Report, study, thresholds: dict) -> dict[str, Any]:
    from django.db.models.signals import pre_init

    from analysis import frames, pipeline, quality, registry
    from analysis.design import study_design

    created = []

    def count(sender, **kwargs):
        created.append(sender)

    pre_init.connect(count)
    with report.step("frames: ratings_frame") as step:
        ratings = frames.ratings_frame(study.pk)
        step.note = f"{len(ratings)} rows"
    design = study_design(study.pk)
    with report.step("frames: participants_frame") as step:
        participants = frames.participants_frame(study.pk, design)
        step.note = f"{len(participants)} rows"
    with report.step("frames: gold_frame"):
        gold = frames.gold_frame(study.pk)
    pre_init.disconnect(count)
    orm_objects = len(created)

    with report.step("quality: apply_quality_rules") as step:
        result = quality.apply_quality_rules(ratings, participants, gold, thresholds, design.subgroups)
        enriched = participants.merge(
            result.participants.drop(columns=["duration_minutes", "attention_failures"]), on="participant_id"
        )
        inputs = pipeline.statistics_inputs({"ratings": ratings, "participants": enriched, "gold": gold})
        step.note = f"{len(inputs.kept['participants'])} retained, {len(inputs.kept['ratings'])} ratings"

    tables = {}
    options = pipeline.with_design_options(pipeline.options_from_settings(registry.REGISTERED), design)
    for analysis in registry.statistics_analyses(design=design.features):
        with report.step(f"analysis: {analysis.name}") as step:
            tables[analysis.name] = pipeline.compute_table(analysis, inputs, options)
            notes = sorted({n for n in tables[analysis.name].get("note", pd.Series(dtype=object)).dropna() if n})
            step.note = "; ".join(notes)[:150]
    return {"tables": tables, "quality": result.participants, "orm_objects": orm_objects}


# ---------------------------------------------------------------- the floor: pandas + scipy on in-memory frames

REGIONS = {
    "Northeast": "CT ME MA NH RI VT NJ NY PA", "Midwest": "IL IN MI OH WI IA KS MN MO NE ND SD",
    "South": "DE DC FL GA MD NC SC VA WV AL KY MS TN AR LA OK TX", "West": "AZ CO ID MT NV NM UT WY AK CA HI OR WA",
}
STATE_REGION = {state: region for region, states in REGIONS.items() for state in states.split()}


def floor_read(paths: dict[str, Path]) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    definition = json.loads((ROOT / "fixtures" / "tide.json").read_text())
    items = pd.DataFrame([
        {"response_id": r["id"], "scenario": b["scenario"], "model": r["system"], "condition": r["condition"]}
        for b in definition["blocks"] for r in b["responses"]
    ])
    ratings = pd.read_csv(
        paths["ratings"], dtype={"participant_id": "category", "block_id": "category", "response_id": "category",
                                 "position": np.int64, "rating": float, "rank": float},
        parse_dates=["block_started_at", "block_submitted_at"], date_format="ISO8601",
    )
    ratings = ratings.merge(items.astype("category"), on="response_id", how="left")
    ratings["seconds_on_block"] = (ratings["block_submitted_at"] - ratings["block_started_at"]).dt.total_seconds()
    people = pd.read_csv(paths["participants"], dtype=str, keep_default_na=False)
    people["started_at"] = pd.to_datetime(people["started_at"], format="ISO8601")
    people["finished_at"] = pd.to_datetime(people["finished_at"].replace("", None), format="ISO8601")
    gold = pd.read_csv(paths["gold"])
    return ratings, people, gold


def floor_quality(ratings: pd.DataFrame, people: pd.DataFrame, gold: pd.DataFrame, t: dict) -> pd.DataFrame:
    rated = ratings[ratings["rating"].notna()]
    by = rated.groupby("participant_id", observed=True)
    error = (rated["rating"] - rated["response_id"].map(gold.set_index("response_id")["gold_score"]).astype(float)).abs()
    blocks = ratings.drop_duplicates(["participant_id", "block_id"])
    answered = blocks[blocks["seconds_on_block"].notna()]
    per = pd.DataFrame({
        "sd": by["rating"].std(ddof=1),
        "mae": error.groupby(rated["participant_id"], observed=True).mean(),
        "fast_share": (answered["seconds_on_block"] < t["fast_block_seconds"])
        .groupby(answered["participant_id"], observed=True).mean(),
        "answered": answered.groupby("participant_id", observed=True).size(),
        "assigned": blocks.groupby("participant_id", observed=True).size(),
    })
    table = people.set_index("participant_id").join(per)
    minutes = (table["finished_at"] - table["started_at"]).dt.total_seconds() / 60
    flags = {
        "incomplete": table["finished_at"].isna() | (table["answered"].fillna(0) < table["assigned"].fillna(0)),
        "attention": table["attention_passed"].str.lower().eq("false").astype(int) > t["attention_failures_allowed"],
        "duration": (minutes < t["duration_min_minutes"]) | (minutes > t["duration_max_minutes"]),
        "speed": table["fast_share"] > t["fast_share_max"],
        "straightlining": (table["sd"] < t["straightline_sd_max"]) & (table["mae"] > t["straightline_mae_min"]),
    }
    excluded_by = pd.Series("", index=table.index, dtype=object)
    for rule in reversed(list(flags)):
        excluded_by = excluded_by.mask(flags[rule].fillna(False).astype(bool), rule)
    return table.assign(excluded_by=excluded_by, region=table["state"].map(STATE_REGION))


def floor_win_table(ratings: pd.DataFrame) -> pd.DataFrame:
    rated = ratings[ratings["rating"].notna()]
    systems = rated[rated["condition"] != "reference"]
    means = systems.groupby(["model", "scenario", "condition"], observed=True)["rating"].mean().unstack("condition")
    ref = rated[rated["condition"] == "reference"].groupby("block_id", observed=True)["rating"].agg(["sum", "count"])
    where = systems[["model", "scenario", "block_id"]].drop_duplicates().join(ref, on="block_id")
    ref_sum = where.groupby(["model", "scenario"], observed=True)[["sum", "count"]].sum()
    table = pd.DataFrame({"zs_mean": means["zero-shot"], "ft_mean": means["fine-tuned"],
                          "reference_mean": ref_sum["sum"] / ref_sum["count"]})
    table["winner"] = np.select([np.isclose(table["zs_mean"], table["ft_mean"], rtol=0, atol=1e-9),
                                 table["zs_mean"] > table["ft_mean"]], ["tie", "zero-shot"], "fine-tuned")
    table["reference_points"] = ((table["reference_mean"] > table["zs_mean"] + 1e-9).astype(int)
                                 + (table["reference_mean"] > table["ft_mean"] + 1e-9).astype(int))
    return table.reset_index()


def _age_60(age: pd.Series) -> pd.Series:
    number = pd.to_numeric(age, errors="coerce")
    bands = {"18-29": "under 60", "30-39": "under 60", "40-49": "under 60", "50-59": "under 60",
             "60-69": "60+", "70+": "60+"}
    return age.map(bands).where(number.isna(), np.where(number >= 60, "60+", "under 60"))


def floor_groups(people: pd.DataFrame) -> dict[str, pd.Series]:
    missing = {"", "Other/Unknown", "Prefer not to answer"}
    groups = {"age": _age_60(people["age"])}
    for grouping, a in (("education", "Graduate or professional degree"), ("race", "White or Caucasian")):
        answer = people[grouping]
        groups[grouping] = pd.Series(np.where(answer == a, a, "other"), index=people.index).where(~answer.isin(missing))
    groups["gender"] = people["gender"].where(people["gender"].isin(["Woman", "Man"]))
    return groups


def floor_ttests(ratings: pd.DataFrame, people: pd.DataFrame) -> pd.DataFrame:
    rated = ratings[ratings["rating"].notna()]
    per_participant = rated.groupby(["participant_id", "model"], observed=True)["rating"].mean().reset_index()
    rows = []
    for grouping, labels in floor_groups(people).items():
        for level, data in (("participant", per_participant), ("rating", rated)):
            group = data["participant_id"].astype(object).map(labels)
            summary = data.groupby([data["model"], group], observed=True)["rating"].agg(["count", "mean", "var"])
            first, second = {"age": ("60+", "under 60"), "gender": ("Woman", "Man")}.get(
                grouping, (labels.dropna().loc[lambda s: s != "other"].iloc[0], "other"))
            for model in summary.index.get_level_values(0).unique():
                a, b = summary.loc[(model, first)], summary.loc[(model, second)]
                t, p = sps.ttest_ind_from_stats(a["mean"], np.sqrt(a["var"]), a["count"], b["mean"],
                                                np.sqrt(b["var"]), b["count"], equal_var=False)
                pooled = ((a["count"] - 1) * a["var"] + (b["count"] - 1) * b["var"]) / (a["count"] + b["count"] - 2)
                rows.append({"grouping": grouping, "model": model, "level": level, "n_a": a["count"],
                             "n_b": b["count"], "t": t, "p": p, "cohen_d": (a["mean"] - b["mean"]) / np.sqrt(pooled)})
    return pd.DataFrame(rows)


def floor_anova(ratings: pd.DataFrame, people: pd.DataFrame) -> pd.DataFrame:
    rated = ratings[ratings["rating"].notna()]
    region = rated["participant_id"].astype(object).map(people["region"])
    rated = rated.assign(region=region).dropna(subset=["region"])
    per_participant = rated.groupby(["scenario", "participant_id", "region"], observed=True)["rating"].mean().reset_index()
    rows = []
    for level, data in (("participant", per_participant), ("rating", rated)):
        summary = data.groupby(["scenario", "region"], observed=True)["rating"].agg(["count", "mean", "var"])
        for scenario, s in summary.groupby(level=0):
            n, k = s["count"].sum(), len(s)
            grand = (s["count"] * s["mean"]).sum() / n
            between = (s["count"] * (s["mean"] - grand) ** 2).sum()
            within = ((s["count"] - 1) * s["var"]).sum()
            f = (between / (k - 1)) / (within / (n - k))
            rows.append({"scenario": scenario, "level": level, "F": f, "p": sps.f.sf(f, k - 1, n - k),
                         "eta_squared": between / (between + within)})
    return pd.DataFrame(rows)


def run_floor(report: Report, paths: dict[str, Path], thresholds: dict) -> dict[str, Any]:
    print("floor (pandas + scipy on in-memory frames):")
    with report.step("floor: read CSVs"):
        ratings, people, gold = floor_read(paths)
    with report.step("floor: quality rules") as step:
        table = floor_quality(ratings, people, gold, thresholds)
        kept = table[table["excluded_by"] == ""]
        kept_ratings = ratings[ratings["participant_id"].isin(kept.index)]
        step.note = f"{len(kept)} retained"
    out = {"quality": table}
    for name, compute in (("win_table", lambda: floor_win_table(kept_ratings)),
                          ("ttests", lambda: floor_ttests(kept_ratings, kept)),
                          ("anova", lambda: floor_anova(kept_ratings, kept))):
        with report.step(f"floor: {name}"):
            out[name] = compute()
    return out


def check_same(platform_out: dict, floor_out: dict) -> list[str]:
    """Differences between the platform's results and the floor's (empty = same)."""
    problems = []
    mine = platform_out["quality"]["excluded_by"].value_counts().sort_index()
    theirs = floor_out["quality"]["excluded_by"].value_counts().sort_index()
    if not mine.equals(theirs):
        problems.append(f"excluded_by counts differ: {mine.to_dict()} vs {theirs.to_dict()}")
    tables = platform_out["tables"]
    win = tables["win_table"].merge(floor_out["win_table"], on=["model", "scenario"], suffixes=("", "_f"))
    for column in ("zs_mean", "ft_mean", "reference_mean"):
        if len(win) != len(tables["win_table"]) or not np.allclose(win[column], win[column + "_f"]):
            problems.append(f"win_table {column} differs")
    tt = tables["ttests"].merge(floor_out["ttests"], on=["grouping", "model", "level"], suffixes=("", "_f"))
    if len(tt) != len(tables["ttests"]) or not np.allclose(tt[["t", "p", "cohen_d"]].to_numpy(float),
                                                           tt[["t_f", "p_f", "cohen_d_f"]].to_numpy(float)):
        problems.append("ttests differ")
    an = tables["anova"].merge(floor_out["anova"], on=["scenario", "level"], suffixes=("", "_f"))
    if len(an) != len(tables["anova"]) or not np.allclose(an[["F", "p", "eta_squared"]].to_numpy(float),
                                                          an[["F_f", "p_f", "eta_squared_f"]].to_numpy(float)):
        problems.append("anova differs")
    return problems


# ---------------------------------------------------------------- main


def verdict(ok: bool) -> str:
    return "PASS" if ok else "FAIL"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--participants", type=int, default=10_000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--data", type=Path, default=None, help="CSV folder (default var/bench/<participants>)")
    parser.add_argument("--keep", action="store_true", help="reuse the CSVs and the import already in the database")
    parser.add_argument("--fk-triggers", choices=["default", "checked", "both"], default="default",
                        help="PostgreSQL: import as the code does (default), with the FK triggers forced on "
                             "(checked), or both, one after the other")
    parser.add_argument("--skip", nargs="*", default=[], help="analyses to leave out, e.g. mixed_model ordinal_model")
    args = parser.parse_args()
    warnings.simplefilter("ignore")

    data = args.data or ROOT / "var" / "bench" / str(args.participants)
    paths = {name: data / f"{name}.csv" for name in ("participants", "ratings", "gold")}
    setup_django()
    from django.db import connection

    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_backend_pid()")
            SERVER_PID.append(cursor.fetchone()[0])
    print(f"database: {connection.vendor} {connection.settings_dict['NAME']}; {os.cpu_count()} cores; "
          f"load average at start: {load()}")
    report = Report()
    if not (args.keep and all(p.exists() for p in paths.values())):
        with report.step("generate CSVs (bench/generate.py)"):
            generate.write(data, args.participants, args.seed)
    study = tide_study()
    from analysis.imports.importers import gold_import
    from surveys.models import Participant

    if not (args.keep and Participant.objects.filter(study=study).exists()):
        modes = ["default", "checked"] if args.fk_triggers == "both" else [args.fk_triggers]
        for i, mode in enumerate(modes):
            clear_participants(study)
            run_import(report, study, paths, mode)
        with paths["gold"].open("rb") as gold_file, report.step("import gold (gold_import)"):
            gold_import(study=study, gold_file=gold_file)
    else:
        print("  (--keep: reusing the import in the database)")
    thresholds = dict(study.quality_thresholds) if hasattr(study, "quality_thresholds") else study_thresholds(study)

    print(f"platform (load average {load()}):")
    from analysis import registry

    for name in args.skip:
        registry.ANALYSES.pop(name, None)
    platform_out = platform(report, study, thresholds)
    floor_out = run_floor(report, paths, thresholds)
    differences = check_same(platform_out, floor_out)
    summarize(report, args, platform_out, differences)


def study_thresholds(study) -> dict:
    from surveys.models import QUALITY_FIELDS

    return {name: getattr(study, name) for name in QUALITY_FIELDS}


def summarize(report: Report, args, platform_out: dict, differences: list[str]) -> None:
    steps = {s.name: s for s in report.steps}
    paper_names = [n for n in steps if n.startswith("frames:")] + ["quality: apply_quality_rules"] + [
        f"analysis: {n}" for n in PAPER]
    floor_names = [n for n in steps if n.startswith("floor:")]
    paper_s, paper_cpu = (sum(getattr(steps[n], a) for n in paper_names) for a in ("seconds", "cpu"))
    floor_s, floor_cpu = (sum(getattr(steps[n], a) for n in floor_names) for a in ("seconds", "cpu"))
    peak = max(steps[n].rss_mb for n in paper_names)
    floor_peak = max(steps[n].rss_mb for n in floor_names)
    print(f"\nload average at end: {load()}")
    print("results: platform == floor" if not differences else "results DIFFER: " + "; ".join(differences))
    print("\n| step | time (s) | cpu (s) | peak RSS MB (+ over start) | floor time (s) | floor cpu (s) | ratio (time) |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    pairs = [("frames (ratings + participants + gold)", [n for n in steps if n.startswith("frames:")], "floor: read CSVs"),
             ("quality: apply_quality_rules", ["quality: apply_quality_rules"], "floor: quality rules"),
             *[(f"analysis: {n}", [f"analysis: {n}"], f"floor: {n}") for n in PAPER]]
    for label, names, floor_name in pairs:
        chosen = [steps[n] for n in names]
        seconds, cpu = sum(s.seconds for s in chosen), sum(s.cpu for s in chosen)
        memory = f"{max(s.rss_mb for s in chosen):.0f} (+{max(s.peak_mb for s in chosen):.0f})"
        floor = steps[floor_name]
        print(f"| {label} | {seconds:.2f} | {cpu:.2f} | {memory} | {floor.seconds:.2f} | {floor.cpu:.2f} "
              f"| {seconds / floor.seconds:.1f}x |")
    print(f"| **paper path** (frames + quality + win table + t-tests + ANOVA) | **{paper_s:.2f}** | {paper_cpu:.2f} "
          f"| {peak:.0f} | **{floor_s:.2f}** | {floor_cpu:.2f} (peak {floor_peak:.0f} MB) | **{paper_s / floor_s:.1f}x** |")
    print("\n| other step | time (s) | cpu (s) | peak RSS MB (+ over start) | note |")
    print("|---|---:|---:|---:|---|")
    for n, s in steps.items():
        if n.startswith(("import", "generate")) or (n.startswith("analysis:") and n.split(": ")[1] not in PAPER):
            print(f"| {n} | {s.seconds:.2f} | {s.cpu:.2f} | {s.rss_mb:.0f} (+{s.peak_mb:.0f}) | {s.note} |")
    print()
    for s in (s for n, s in steps.items() if n.startswith("import (")):
        print(f"{verdict(s.seconds < IMPORT_TARGET_S)}  {s.name}: {s.seconds:.1f} s wall, {s.cpu:.1f} s cpu "
              f"(target < {IMPORT_TARGET_S:.0f} s)")
    orm = platform_out["orm_objects"]
    print(f"{verdict(orm <= ORM_OBJECTS_MAX)}  frame build instantiates {orm} ORM objects "
          f"(rows read as tuples; target <= {ORM_OBJECTS_MAX}, independent of N)")
    print(f"{verdict(paper_s < PAPER_TARGET_S)}  paper path {paper_s:.2f} s wall, {paper_cpu:.2f} s cpu "
          f"(target < {PAPER_TARGET_S:.0f} s)")
    print(f"{verdict(paper_s <= PAPER_MAX_RATIO * floor_s)}  paper path / floor = {paper_s / floor_s:.2f} wall, "
          f"{paper_cpu / floor_cpu:.2f} cpu (target <= {PAPER_MAX_RATIO:.0f}x)")
    print(f"{verdict(not differences)}  platform results equal the floor's (excluded_by counts, win table, "
          f"t-tests, ANOVA)")
    print(f"load average at end: {load()}")


if __name__ == "__main__":
    main()
