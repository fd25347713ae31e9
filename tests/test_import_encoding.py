"""Uploads that are not UTF-8 text, or that hold a NUL, are refused once, on their line.

They used to raise ``UnicodeDecodeError`` (a 500 from the import page and the
API, a traceback from ``import_responses``), or a ``DataError`` on PostgreSQL
for a NUL in a participant id; a latin-1 byte in participants.csv was put on
line 1 and followed by hundreds of "unknown participant" lines.
"""

from __future__ import annotations

import gzip
import html
import io
import zipfile

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.core.management import CommandError, call_command
from rest_framework.test import APIClient

from analysis.imports.importers import ImportProblems, gold_import, responses_import
from analysis.models import GoldScore
from surveys.models import BlockVisit, Participant, Rating
from tests.support.response_files import base_participants, base_ratings, csv_text as text

UTF8 = 'save the file as UTF-8 (in Excel: "CSV UTF-8")'
NUL = "holds a NUL character (byte 0x00), which no text can contain; remove it"


def _participants() -> bytes:
    return text(base_participants()).encode()


def _ratings() -> bytes:
    return text(base_ratings()).encode()


def _xlsx(content: bytes) -> bytes:
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as archive:
        archive.writestr("xl/worksheets/sheet1.xml", content)
    return out.getvalue()


# (name, participants.csv bytes, ratings.csv bytes, the one problem expected)
BAD_FILES = [
    ("a latin-1 byte in ratings.csv", _participants(), _ratings().replace(b"Q1-R4", b"Q1-R\xe94", 1),
     f"ratings.csv:5:response_id: not UTF-8 text (byte 0xE9 at character 11 of the line); {UTF8}"),
    ("a latin-1 byte in participants.csv", _participants().replace(b"female", b"f\xe9male"), _ratings(),
     f"participants.csv:2:sex: not UTF-8 text (byte 0xE9 at character 55 of the line); {UTF8}"),
    ("a latin-1 byte in a header", _participants(), _ratings().replace(b"position", b"posi\xe7ion", 1),
     f"ratings.csv:1:: not UTF-8 text (byte 0xE7 at character 41 of the line); {UTF8}"),
    ("a UTF-16 ratings.csv", _participants(), text(base_ratings()).encode("utf-16"),
     f"ratings.csv:1:: UTF-16 text (it starts with a UTF-16 byte-order mark), not UTF-8; {UTF8}"),
    ("a UTF-16 file without its mark", text(base_participants()).encode("utf-16-le"), _ratings(),
     f"participants.csv:1:: UTF-16 text (every other byte is 0), not UTF-8; {UTF8}"),
    ("a gzip-compressed ratings.csv", _participants(), gzip.compress(_ratings()),
     "ratings.csv:1:: gzip-compressed, not CSV text; decompress it (e.g. gunzip) and upload the .csv inside"),
    ("an Excel workbook", _xlsx(_participants()), _ratings(),
     f"participants.csv:1:: a zip archive (an Excel .xlsx workbook?), not CSV text; {UTF8}"),
]
BAD_IDS = [b[0] for b in BAD_FILES]


def _named(content: bytes, name: str) -> io.BytesIO:
    handle = io.BytesIO(content)
    handle.name = name
    return handle


def _nothing_written() -> bool:
    return not (Participant.objects.exists() or BlockVisit.objects.exists() or Rating.objects.exists())


@pytest.mark.parametrize("name,participants,ratings,expected", BAD_FILES, ids=BAD_IDS)
def test_a_file_that_is_not_utf8_is_one_problem_on_its_line(tide, name, participants, ratings, expected):
    with pytest.raises(ImportProblems) as caught:
        responses_import(study=tide, participants_file=_named(participants, "participants.csv"),
                         ratings_file=_named(ratings, "ratings.csv"))
    assert caught.value.problems == [expected]
    assert _nothing_written()


def test_a_text_mode_file_is_located_in_its_bytes(tide, tmp_path):
    (tmp_path / "participants.csv").write_bytes(_participants().replace(b"Asian", b"Asi\xe1n"))
    with open(tmp_path / "participants.csv", newline="", encoding="utf-8-sig") as handle, pytest.raises(ImportProblems) as caught:
        responses_import(study=tide, participants_file=handle, ratings_file=io.BytesIO(_ratings()))
    assert caught.value.problems == [
        f"participants.csv:3:race: not UTF-8 text (byte 0xE1 at character 47 of the line); {UTF8}"]


def test_utf8_text_beyond_ascii_still_imports(tide):
    participants = text(base_participants()).replace("pB", "pé").encode()
    ratings = text(base_ratings()).replace("pB", "pé").encode()
    report = responses_import(study=tide, participants_file=io.BytesIO(b"\xef\xbb\xbf" + participants),
                              ratings_file=io.BytesIO(ratings))
    assert report.participants_created == 2 and Participant.objects.filter(external_id="pé").exists()


# ---------------------------------------------------------------- NUL characters


def test_a_nul_in_a_participant_id_is_refused_with_its_place(tide):
    participants = _participants().replace(b"pB", b"p\0B")
    ratings = _ratings().replace(b"pB", b"p\0B")
    with pytest.raises(ImportProblems) as caught:
        responses_import(study=tide, participants_file=_named(participants, "participants.csv"),
                         ratings_file=_named(ratings, "ratings.csv"))
    problems = caught.value.problems
    assert problems[0] == f"participants.csv:3:participant_id: {NUL}"
    assert problems[1:] == [f"ratings.csv:{line}:participant_id: {NUL}" for line in range(12, 22)]
    assert _nothing_written()


@pytest.mark.parametrize("column", ["block_id", "response_id", "rating", "block_started_at"])
def test_a_nul_in_any_ratings_cell_is_refused_with_file_line_and_column(tide, column):
    rows = base_ratings()
    at = rows[0].index(column)
    rows[3][at] = rows[3][at][:1] + "\0" + rows[3][at][1:]
    with pytest.raises(ImportProblems) as caught:
        responses_import(study=tide, participants_file=io.BytesIO(_participants()),
                         ratings_file=io.BytesIO(text(rows).encode()))
    assert caught.value.problems == [f"ratings.csv:4:{column}: {NUL}"]
    assert _nothing_written()


def test_a_nul_in_a_quoted_file_takes_the_exact_reader_and_is_refused_too(tide):
    rows = base_ratings()
    rows[2][1] = "Q\0\"1"  # the quote sends the file to the csv module
    with pytest.raises(ImportProblems) as caught:
        responses_import(study=tide, participants_file=io.BytesIO(_participants()),
                         ratings_file=io.BytesIO(text(rows).encode()))
    assert caught.value.problems == [f"ratings.csv:3:block_id: {NUL}"]


def test_a_nul_in_a_demographic_answer_or_a_header_is_refused(tide):
    with pytest.raises(ImportProblems) as caught:
        responses_import(study=tide, participants_file=io.BytesIO(_participants().replace(b"Asian", b"As\0ian")),
                         ratings_file=io.BytesIO(_ratings()))
    assert caught.value.problems[0] == f"participants.csv:3:race: {NUL}"
    with pytest.raises(ImportProblems) as caught:
        responses_import(study=tide, participants_file=io.BytesIO(_participants()),
                         ratings_file=io.BytesIO(_ratings().replace(b"rank", b"ra\0nk", 1)))
    assert caught.value.problems == [f"ratings.csv:1:: the header {NUL}"]


def test_gold_scores_are_held_to_the_same_rules(tide):
    with pytest.raises(ImportProblems) as caught:
        gold_import(study=tide, gold_file=_named(b"response_id,gold_score\nQ1-R1,3\nQ1-R\xe92,4\n", "gold.csv"))
    assert caught.value.problems == [f"gold.csv:3:response_id: not UTF-8 text (byte 0xE9 at character 5 of the line); {UTF8}"]
    with pytest.raises(ImportProblems) as caught:
        gold_import(study=tide, gold_file=_named(b"response_id,gold_score\nQ1-R1\0,3\n", "gold.csv"))
    assert caught.value.problems == [f"gold.csv:2:response_id: {NUL}"]
    assert not GoldScore.objects.exists()


# ---------------------------------------------------------------- the page, the API, the command


@pytest.fixture
def owner_client(client, owner):
    client.force_login(owner)
    return client


@pytest.mark.parametrize("name,participants,ratings,expected", BAD_FILES[:4] + BAD_FILES[5:6], ids=BAD_IDS[:4] + BAD_IDS[5:6])
def test_the_import_page_answers_400_with_the_problem(owner_client, study, name, participants, ratings, expected):
    response = owner_client.post(f"/studies/{study.slug}/import/", {
        "kind": "responses",
        "participants": SimpleUploadedFile("participants.csv", participants, "text/csv"),
        "ratings": SimpleUploadedFile("ratings.csv", ratings, "text/csv"),
    })
    assert response.status_code == 400
    page = html.unescape(response.content.decode())
    assert "Nothing was imported: 1 problem" in page and expected in page
    assert _nothing_written()


def test_the_import_page_refuses_a_nul_with_400(owner_client, study):
    response = owner_client.post(f"/studies/{study.slug}/import/", {
        "kind": "responses",
        "participants": SimpleUploadedFile("participants.csv", _participants().replace(b"pA", b"p\0A"), "text/csv"),
        "ratings": SimpleUploadedFile("ratings.csv", _ratings().replace(b"pA", b"p\0A"), "text/csv"),
    })
    assert response.status_code == 400
    assert f"participants.csv:2:participant_id: {NUL}" in html.unescape(response.content.decode())
    assert _nothing_written()


def test_the_import_page_says_in_words_which_gold_scores_it_imported(owner_client, study):
    # (the sentence for responses: tests/test_researcher_pages.py)
    gold = SimpleUploadedFile("gold.csv", b"response_id,gold_score\nQ1-R1,3\n", "text/csv")
    response = owner_client.post(f"/studies/{study.slug}/import/", {"kind": "gold", "gold": gold})
    page = response.content.decode()
    assert response.status_code == 200 and "GoldImportReport(" not in page
    assert "Imported gold scores: 1 score written, 0 unchanged." in page


@pytest.fixture
def api(owner, owner_token) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {owner_token}")
    return client


@pytest.mark.parametrize("name,participants,ratings,expected", BAD_FILES, ids=BAD_IDS)
def test_the_api_answers_400_with_the_problem_as_json(api, study, name, participants, ratings, expected):
    response = api.post(f"/api/studies/{study.slug}/imports/responses/", {
        "participants": _named(participants, "participants.csv"), "ratings": _named(ratings, "ratings.csv"),
    }, format="multipart")
    assert response.status_code == 400
    assert response.json() == {"problems": [expected]}
    assert _nothing_written()


def test_the_api_refuses_a_nul_in_a_participant_id_with_400(api, study):
    response = api.post(f"/api/studies/{study.slug}/imports/responses/", {
        "participants": _named(_participants().replace(b"pA", b"p\0A"), "participants.csv"),
        "ratings": _named(_ratings(), "ratings.csv"),
    }, format="multipart")
    assert response.status_code == 400
    assert response.json()["problems"][0] == f"participants.csv:2:participant_id: {NUL}"
    assert _nothing_written()


def test_the_command_reports_the_line_without_a_traceback(tide, tmp_path, capsys):
    (tmp_path / "p.csv").write_bytes(_participants())
    (tmp_path / "r.csv").write_bytes(_ratings().replace(b"Q2-R3", b"Q2-R\xff3", 1))
    with pytest.raises(CommandError, match=r"nothing imported: 1 problem"):
        call_command("import_responses", "--study", "tide", "--participants", str(tmp_path / "p.csv"),
                     "--ratings", str(tmp_path / "r.csv"))
    assert capsys.readouterr().err.strip() == (
        f"r.csv:9:response_id: not UTF-8 text (byte 0xFF at character 11 of the line); {UTF8}")
    (tmp_path / "r.gz").write_bytes(gzip.compress(_ratings()))
    with pytest.raises(CommandError):
        call_command("import_responses", "--study", "tide", "--participants", str(tmp_path / "p.csv"),
                     "--ratings", str(tmp_path / "r.gz"))
    assert "r.gz:1:: gzip-compressed" in capsys.readouterr().err
    (tmp_path / "nul.csv").write_bytes(_participants().replace(b"pB", b"p\0B"))
    with pytest.raises(CommandError):
        call_command("import_responses", "--study", "tide", "--participants", str(tmp_path / "nul.csv"),
                     "--ratings", str(tmp_path / "r.csv"))
    assert f"nul.csv:3:participant_id: {NUL}" in capsys.readouterr().err
    (tmp_path / "gold.csv").write_bytes(b"response_id,gold_score\n\xfeQ1-R1,3\n")
    with pytest.raises(CommandError):
        call_command("import_gold", "--study", "tide", str(tmp_path / "gold.csv"))
    assert "gold.csv:2:response_id: not UTF-8 text" in capsys.readouterr().err
    assert _nothing_written() and not GoldScore.objects.exists()


# ---------------------------------------------------------------- classic-Mac line endings (a CR alone)


def _cr_only(content: bytes) -> bytes:
    return content.replace(b"\r\n", b"\n").replace(b"\n", b"\r")


def test_files_with_classic_mac_line_endings_import_as_their_lf_copies_do(tide):
    report = responses_import(study=tide, participants_file=io.BytesIO(_cr_only(_participants())),
                              ratings_file=io.BytesIO(_cr_only(_ratings())))
    assert (report.participants_created, report.visits_created, report.ratings_created) == (2, 4, 15)
    assert Participant.objects.get(external_id="pA").demographics["state"] == "CA"  # the last cell of a line
    gold = gold_import(study=tide, gold_file=io.BytesIO(b"response_id,gold_score\rQ1-R1,3\rQ1-R2,4\r"))
    assert dict(GoldScore.objects.values_list("item__key", "score")) == {"Q1-R1": 3, "Q1-R2": 4} and gold


def test_a_problem_in_a_classic_mac_file_is_put_on_its_line(tide, tmp_path):
    ratings = _cr_only(_ratings().replace(b"Q2-R3", b"Q2-R\xff3", 1))
    with pytest.raises(ImportProblems) as caught:
        responses_import(study=tide, participants_file=io.BytesIO(_cr_only(_participants())),
                         ratings_file=_named(ratings, "ratings.csv"))
    assert caught.value.problems == [
        f"ratings.csv:9:response_id: not UTF-8 text (byte 0xFF at character 11 of the line); {UTF8}"]
    rows = base_ratings()
    rows[4][4] = "seven"
    (tmp_path / "ratings.csv").write_bytes(_cr_only(text(rows).encode()))
    with open(tmp_path / "ratings.csv", newline="", encoding="utf-8-sig") as handle, \
            pytest.raises(ImportProblems) as caught:
        responses_import(study=tide, participants_file=io.BytesIO(_cr_only(_participants())), ratings_file=handle)
    assert [problem.split(": ")[0] for problem in caught.value.problems] == ["ratings.csv:5:rating"]
    assert _nothing_written()


def test_the_import_page_reads_a_classic_mac_file(owner_client, study):
    response = owner_client.post(f"/studies/{study.slug}/import/", {
        "kind": "responses",
        "participants": SimpleUploadedFile("participants.csv", _cr_only(_participants()), "text/csv"),
        "ratings": SimpleUploadedFile("ratings.csv", _cr_only(_ratings()), "text/csv"),
    })
    assert response.status_code in (200, 302)
    assert Participant.objects.filter(study=study).count() == 2
