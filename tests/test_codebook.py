"""The codebook and the README of the "everything for the paper" zip describe every file and column in it."""

from __future__ import annotations

import csv
import importlib
import io
import math
import pkgutil
import re
import zipfile
from collections import Counter
from datetime import datetime

import pandas as pd
import pytest

from analysis import quality, registry, stats
from analysis.exporting import codebook, exports
from analysis.design import study_design
from analysis.exporting.zip_readme import zip_readme_text
from surveys.models import DemographicQuestion
from surveys.questions import best_worst, free_text, pairwise, rating
from tests.support import stats_data as data
from tests.support.researcher import fill_with_bots, finished_run

# The quality step writes these tables; the statistics step computes the others.
QUALITY_TABLES = {"filter_flow": quality.FILTER_FLOW_COLUMNS,
                  "filter_flow_by_subgroup": quality.FILTER_FLOW_BY_SUBGROUP_COLUMNS}
EXPORT_FILES = {"participants.csv": exports.PARTICIPANT_EXPORT_COLUMNS_BEFORE + exports.PARTICIPANT_EXPORT_COLUMNS_AFTER,
                "ratings.csv": [*rating.RATINGS_COLUMNS, "dimension"],
                "free_text.csv": free_text.FREE_TEXT_COLUMNS, "choices.csv": best_worst.CHOICE_EXPORT_COLUMNS,
                "pairwise.csv": pairwise.PAIRWISE_COLUMNS, "scenarios.csv": exports.SCENARIO_EXPORT_COLUMNS,
                "coverage.csv": exports.COVERAGE_COLUMNS}


def declared_columns(analysis: registry.Analysis) -> list[str]:
    """The columns of a registered table: on empty frames every analysis returns a note row with all of them."""
    empty = pd.DataFrame()
    if analysis.sensitivity_of:
        base = registry.base_of(analysis)
        extra = [empty] * (len(base.inputs) - 1)
        return list(stats.sensitivity(base.function, empty, empty, *extra,
                                      **data.TIDE.options_for(base.design_options)).columns)
    if analysis.function is None:
        return list(QUALITY_TABLES[analysis.name])
    design = data.TIDE.options_for(analysis.design_options)
    return list(analysis.function(*[empty] * len(analysis.inputs), **design).columns)


def every_file_columns() -> dict[str, list[str]]:
    return {**EXPORT_FILES, **{a.filename: declared_columns(a) for a in registry.REGISTERED}}


def column_constants() -> dict[str, list[str]]:
    """Every ``*_COLUMNS`` list of analysis.stats (a module or, once split, a package of modules)."""
    modules = [stats]
    if hasattr(stats, "__path__"):
        modules += [importlib.import_module(f"{stats.__name__}.{m.name}") for m in pkgutil.iter_modules(stats.__path__)]
    return {f"{module.__name__}.{name}": value for module in modules for name, value in vars(module).items()
            if name.endswith("_COLUMNS") and isinstance(value, list)}


def assert_described(filename: str, column: str) -> codebook.Column:
    entry = codebook.column_entry(filename, column)
    assert entry is not None, f"{filename}: no codebook entry for {column}"
    assert entry.meaning and entry.allowed, (filename, column)
    assert entry.type in codebook.TYPES, (filename, column, entry.type)
    return entry


def test_every_column_of_every_registered_table_and_export_has_an_entry():
    columns = every_file_columns()
    assert {a.filename for a in registry.REGISTERED} <= set(columns)
    for filename, names in columns.items():
        assert names, filename
        for column in names:
            assert_described(filename, column)


def test_the_declared_column_constants_are_the_columns_the_tables_have():
    tables = [columns for filename, columns in every_file_columns().items() if filename not in EXPORT_FILES]
    constants = column_constants()
    assert constants, "analysis.stats declares its tables' columns in *_COLUMNS lists"
    for name, columns in constants.items():
        assert columns in tables, f"{name} is not the column list of any registered table"
    for name in ("WIN_COLUMNS", "TTEST_COLUMNS", "ANOVA_COLUMNS", "JUDGE_COLUMNS", "POSITION_COLUMNS"):
        assert any(key.endswith("." + name) for key in constants), name


def test_a_file_specific_entry_names_a_column_that_file_has():
    columns = every_file_columns()
    for filename, entries in codebook.TABLE_COLUMNS.items():
        assert filename in columns, f"TABLE_COLUMNS names {filename}, which the zip never holds"
        assert set(entries) <= set(columns[filename]), (filename, set(entries) - set(columns[filename]))


def test_a_name_with_two_meanings_is_described_per_file():
    assert codebook.column_entry("ttests.csv", "level") != codebook.column_entry("anova.csv", "level")
    assert codebook.column_entry("rater_judge.csv", "method") != codebook.column_entry("bradley_terry.csv", "method")
    assert codebook.column_entry("win_table.csv", "n").meaning.startswith("participants who rated")
    assert codebook.column_entry("descriptives.csv", "n").meaning.startswith("ratings in the cell")
    # A sensitivity table reads its base table's entries.
    assert codebook.column_entry("sensitivity_ttests.csv", "level") == codebook.column_entry("ttests.csv", "level")
    assert codebook.column_entry("sensitivity_anova.csv", "variant") == codebook.COLUMNS["variant"]


def test_entries_use_the_known_types_and_name_no_study():
    entries = [*codebook.COLUMNS.values(), *(e for table in codebook.TABLE_COLUMNS.values() for e in table.values())]
    study_words = re.compile(r"empath|zero-shot|fine-tuned|TIDE|\bQ\d|\bS\d", re.IGNORECASE)
    for entry in entries:
        assert entry.type in codebook.TYPES, entry
        assert entry.meaning and entry.allowed, entry
        # A study's values may only appear as an example: "(e.g. ... in TIDE)".
        text = re.sub(r"\(e\.g\. [^)]* in TIDE\)", "", f"{entry.meaning} | {entry.allowed}")
        assert not study_words.search(text), entry


def test_a_column_unknown_to_the_codebook_is_said_to_be_undescribed():
    rows = list(codebook.codebook_rows({"win_table.csv": ["model", "a_column_of_an_older_version"]}))
    assert rows[0] == ["file", "column", "meaning", "type", "allowed_values"]
    assert rows[1][2:] == list(codebook.column_entry("win_table.csv", "model"))
    assert rows[2] == ["win_table.csv", "a_column_of_an_older_version", *codebook.UNDESCRIBED]


# --------------------------------------------------------------------------- the zip of a finished run


def open_zip(run) -> zipfile.ZipFile:
    return zipfile.ZipFile(io.BytesIO(b"".join(exports.everything_zip(run=run))))


def read_csvs(archive: zipfile.ZipFile) -> dict[str, list[list[str]]]:
    return {name: list(csv.reader(io.StringIO(archive.read(name).decode("utf-8"))))
            for name in archive.namelist() if name.endswith(".csv")}


def fits(kind: str, cell: str) -> bool:
    """Whether a non-blank cell is a value of the codebook type ``kind``."""
    if kind == codebook.TEXT:
        return True
    if kind == codebook.BOOLEAN:
        return cell in {"true", "false"}
    if kind == codebook.TIME:
        return datetime.fromisoformat(cell).utcoffset() is not None
    number = float(cell)
    return number.is_integer() if kind == codebook.INTEGER else not math.isnan(number)


def readme_files(readme: str) -> list[str]:
    section = readme.split("\nFiles\n-----\n", 1)[1].split("\n\n", 1)[0]
    return [line.split()[0] for line in section.splitlines() if not line.startswith("   ")]


def assert_zip_is_described(archive: zipfile.ZipFile) -> None:
    tables = read_csvs(archive)
    codebook_rows = tables.pop("codebook.csv")
    assert codebook_rows[0] == ["file", "column", "meaning", "type", "allowed_values"]
    present = Counter((name, column) for name, rows in tables.items() for column in rows[0])
    assert all(count == 1 for count in present.values()), "a file repeats a column"
    described = Counter((row[0], row[1]) for row in codebook_rows[1:])
    assert described == present, (set(described) ^ set(present))
    kinds = {}
    for filename, column, meaning, kind, allowed in codebook_rows[1:]:
        assert meaning and allowed and kind in codebook.TYPES, (filename, column)
        assert not meaning.startswith("see docs") and meaning != codebook.UNDESCRIBED.meaning, (filename, column)
        kinds[(filename, column)] = kind
    for name, rows in tables.items():
        for row in rows[1:]:
            for column, cell in zip(rows[0], row, strict=True):
                assert cell == "" or fits(kinds[(name, column)], cell), (name, column, cell)
    readme = archive.read("README.txt").decode("utf-8")
    assert readme_files(readme) == archive.namelist()


@pytest.mark.slow(reason="a full analysis run of every fixture study")
@pytest.mark.parametrize("fixture", ["tide", "counselor", "most_least"])
def test_the_zip_of_a_full_run_describes_every_column_of_every_file(request, db, fixture):
    study = request.getfixturevalue(fixture)
    fill_with_bots(study, 12)
    run = finished_run(study)
    archive = open_zip(run)
    names = set(archive.namelist())
    # Exactly the tables the study's design applies to (the registry's ``needs``), the exports every
    # study has, and the answer exports of the answers the study asks for.
    design = study_design(study.pk)
    expected = {a.filename for a in registry.statistics_analyses(design=design.features)}
    expected |= {"filter_flow.csv", "participants.csv", "ratings.csv", "scenarios.csv"}
    expected |= {"filter_flow_by_subgroup.csv"} if design.subgroups else set()
    expected |= {"free_text.csv"} if study.free_text_questions.exists() else set()
    expected |= {"choices.csv"} if study.best_worst_enabled else set()
    assert names - {"codebook.csv", "README.txt"} == expected
    applies = {"tide": ({"win_table.csv", "ttests.csv", "anova.csv", "bradley_terry.csv"},
                        {"best_worst.csv", "free_text.csv", "choices.csv"}),
               "counselor": ({"dimension_wilcoxon.csv", "agreement.csv", "win_table.csv"},
                             {"ttests.csv", "anova.csv", "best_worst.csv", "bradley_terry.csv", "free_text.csv",
                              "choices.csv"}),
               "most_least": ({"best_worst.csv", "best_worst_shares.csv", "free_text.csv", "choices.csv"},
                              {"win_table.csv", "ttests.csv", "anova.csv", "descriptives.csv"})}
    present, absent = applies[fixture]
    assert present <= names and not absent & names
    assert "identifiers.csv" not in names
    assert_zip_is_described(archive)


def test_the_readme_says_what_the_zip_is_and_how_to_read_it(filled, quick_stats):
    run = finished_run(filled)
    archive = open_zip(run)
    assert_zip_is_described(archive)
    readme = archive.read("README.txt").decode("utf-8")
    one_line = " ".join(readme.split())
    assert f'study "{filled.slug}", analysis run {run.pk}' in readme
    assert f"finished at {run.finished_at.isoformat(timespec='seconds')}" in one_line
    assert f"Of the {run.n_participants} participants enrolled, {run.n_retained} were retained" in one_line
    assert 0 < run.n_retained < run.n_participants == 12
    assert run.thresholds == filled.quality_thresholds
    for key, value in run.thresholds.items():
        assert f"{key} = {value}" in one_line, key
    for name in archive.namelist():
        analysis = next((a for a in registry.REGISTERED if a.filename == name), None)
        export = next((e for e in exports.EXPORTS.values() if e.filename == name), None)
        description = analysis.description if analysis else export.description if export else ""
        assert f"{name} {description}".strip() in one_line, name
    assert "'" in one_line and "= + - @" in one_line and "pseudonym" in one_line and "codebook.csv" in one_line
    assert "blank cell" in one_line.lower()
    assert "Analyses that failed" not in readme

    run.failures = {"mixed_model": "LinAlgError: Singular matrix"}
    assert "mixed_model: LinAlgError: Singular matrix" in zip_readme_text(run=run, files={"participants.csv": "participants"})


def test_the_codebook_guards_a_study_choice_that_a_spreadsheet_would_run_as_a_formula(done_run):
    starts = {"sex": "=", "gender": "+", "race": "-", "hispanic": "@"}
    for key, start in starts.items():
        question = DemographicQuestion.objects.get(study=done_run.study, key=key)
        question.choices = [f"{start}HYPERLINK(\"http://x\")", *question.choices]
        question.save()
    codebook_rows = read_csvs(open_zip(done_run))["codebook.csv"]
    allowed = {row[1]: row[4] for row in codebook_rows if row[0] == "participants.csv"}
    for key, start in starts.items():
        assert allowed[key].startswith(f"'{start}HYPERLINK(\"http://x\"); "), allowed[key]
    assert all(not cell.startswith(exports._FORMULA_STARTS) for row in codebook_rows for cell in row)
