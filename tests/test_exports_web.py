"""Exports from the researcher pages: CSV injection, restricted identifiers, the zip for the paper."""

from __future__ import annotations

import csv
import io
import zipfile

import pytest

from surveys.models import Participant
from tests.support.downloads import csv_rows, response_bytes
from tests.support.researcher import QUICK_ANALYSES, finished_run, narrow_analyses
from tests.support.studies import set_answers

# DESIGN 3.3: the tables a paper needs, plus the codebook of every column.
PAPER_FILES = {"filter_flow.csv", "participants.csv", "ratings.csv", "win_table.csv", "ttests.csv", "anova.csv",
               "codebook.csv"}


@pytest.fixture
def paper_stats(monkeypatch):
    """The quick analyses plus the t-tests and ANOVA of DESIGN 3.3."""
    narrow_analyses(monkeypatch, (*QUICK_ANALYSES, "ttests", "anova"))


def test_a_value_that_would_be_a_spreadsheet_formula_is_quoted(client, owner, filled, quick_stats):
    target = Participant.objects.filter(study=filled, status="completed").order_by("pk").first()
    set_answers(Participant.objects.filter(pk=target.pk), employment="=HYPERLINK(\"http://x\")", race="+1", state="")
    run = finished_run(filled)
    client.force_login(owner)
    rows = csv_rows(client.get(f"/studies/{filled.slug}/exports/participants.csv"))
    header, mine = rows[0], next(r for r in rows if r[0] == target.pseudonym)
    assert mine[header.index("employment")] == "'=HYPERLINK(\"http://x\")"
    assert mine[header.index("race")] == "'+1"
    # Negative numbers stay numbers.
    assert all(not r[header.index("sd")].startswith("'") for r in rows[1:])
    assert run.status == "done"


def test_identifiers_need_a_confirmation_and_are_for_owners_and_staff_only(client, owner, other, staff, done_run):
    slug = done_run.study.slug
    url = f"/studies/{slug}/exports/identifiers.csv"
    client.force_login(owner)
    unconfirmed = client.get(url)
    assert unconfirmed.status_code == 302 and unconfirmed["Location"] == f"/studies/{slug}/exports/"
    rows = csv_rows(client.get(url, {"confirm": "1"}))
    assert rows[0] == ["participant_id", "external_id", "payable", "reject_reason", "completion_code"]
    assert {r[1] for r in rows[1:]} == set(Participant.objects.filter(study=done_run.study).values_list(
        "external_id", flat=True))
    exports_page = client.get(f"/studies/{slug}/exports/").content.decode()
    assert "identifiers.csv?confirm=1" in exports_page and "restricted" in exports_page
    client.force_login(other)
    assert client.get(url, {"confirm": "1"}).status_code == 404
    client.force_login(staff)
    assert client.get(url, {"confirm": "1"}).status_code == 200


def test_everything_zip_holds_the_paper_files_and_a_codebook_and_every_csv_parses(client, owner, filled, paper_stats):
    run = finished_run(filled)
    client.force_login(owner)
    response = client.get(f"/studies/{filled.slug}/exports/everything.zip")
    assert response.status_code == 200 and response["Content-Type"] == "application/zip"
    assert f"{filled.slug}-run{run.pk}" in response["Content-Disposition"]
    archive = zipfile.ZipFile(io.BytesIO(response_bytes(response)))
    names = set(archive.namelist())
    assert PAPER_FILES <= names and "identifiers.csv" not in names
    assert "README.txt" in names
    tables = {name: list(csv.reader(io.StringIO(archive.read(name).decode())))
              for name in names if name.endswith(".csv")}
    assert tables["filter_flow.csv"][0] == ["step", "rule", "excluded", "remaining", "flagged_alone"]
    assert tables["win_table.csv"][0][:7] == ["model", "scenario", "zs_mean", "ft_mean", "winner", "reference_mean",
                                              "reference_points"]
    assert tables["anova.csv"][0][:4] == ["scenario", "factor", "level", "F"]
    assert len(tables["participants.csv"]) - 1 == run.n_participants
    externals = set(Participant.objects.values_list("external_id", flat=True))
    assert not any(e in archive.read(name).decode() for name in names for e in externals), "no panel id in the zip"
    assert tables["codebook.csv"][0] == ["file", "column", "meaning", "type", "allowed_values"]
    described = {(row[0], row[1]): row[2] for row in tables["codebook.csv"][1:]}
    for name, rows in tables.items():
        if name != "codebook.csv":
            assert all((name, column) in described for column in rows[0]), name
    for name in ("participants.csv", "ratings.csv", "filter_flow.csv"):
        assert not any(described[(name, c)].startswith("see docs") for c in tables[name][0]), name


def test_every_csv_download_has_an_excel_variant_with_a_utf8_byte_order_mark(client, owner, filled, quick_stats):
    from analysis.exporting.exports import UTF8_BOM

    run = finished_run(filled)
    set_answers(Participant.objects.filter(study=filled), gender="Femme (née à Zürich)")
    client.force_login(owner)
    page = client.get(f"/studies/{filled.slug}/exports/").content.decode()
    assert f'/studies/{filled.slug}/exports/participants.csv?excel=1"' in page
    for path in (f"/studies/{filled.slug}/exports/participants.csv", f"/studies/{filled.slug}/runs/{run.pk}/tables/win_table.csv"):
        plain, excel = response_bytes(client.get(path)), response_bytes(client.get(path + "?excel=1"))
        assert not plain.startswith(UTF8_BOM) and excel == UTF8_BOM + plain, path
    assert "Femme (née à Zürich)" in excel_text(client.get(f"/studies/{filled.slug}/exports/participants.csv?excel=1"))


def excel_text(response) -> str:
    # What Excel does with the mark: read the bytes as UTF-8 ("utf-8-sig" drops the mark).
    return response_bytes(response).decode("utf-8-sig")
