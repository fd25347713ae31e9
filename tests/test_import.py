"""Import of responses and gold scores (DESIGN 3.1): validation, all-or-nothing, idempotence."""

from __future__ import annotations

import csv
import io
import math
import random
from datetime import datetime, timedelta

import numpy as np
import pytest
from django.core.management import CommandError, call_command

from analysis.imports import csv_columns, importers, iso_times
from analysis.imports.importers import ImportProblems, gold_import, responses_import
from analysis.models import GoldScore
from surveys.models import BlockVisit, ItemPlacement, Participant, Rating
from surveys.pseudonyms import pseudonym_for
from tests.support.response_files import P_HEADER, R_HEADER, base_participants, base_ratings, csv_text


def run_import(study, participants=None, ratings=None):
    return responses_import(
        study=study,
        participants_file=io.StringIO(csv_text(participants or base_participants())),
        ratings_file=io.StringIO(csv_text(ratings or base_ratings())),
    )


def problems_of(study, participants=None, ratings=None) -> list[str]:
    with pytest.raises(ImportProblems) as caught:
        run_import(study, participants, ratings)
    assert Participant.objects.count() == 0, "nothing may be written when a row is bad"
    return caught.value.problems


def test_it_imports_participants_visits_placements_and_ratings(tide):
    report = run_import(tide)
    assert (report.participants_created, report.visits_created, report.placements_created, report.ratings_created) == (2, 4, 20, 15)
    a = Participant.objects.get(study=tide, external_id="pA")
    assert a.source == "import" and a.status == "completed" and a.completion_code == tide.completion_code
    assert a.pseudonym == pseudonym_for(key=tide.pseudonym_key, external_id="pA")
    # The study's own words in any case and spacing, and the synonyms its definition declares ("White").
    assert a.demographics == {"age": "34", "sex": "Female", "gender": "Woman", "race": "White or Caucasian",
                              "hispanic": "No", "education": "Bachelor's degree", "employment": "Student", "state": "CA"}
    assert a.imported_attention_passed is True and a.blocks_assigned == 2
    assert a.consented_at == a.started_at and a.last_seen_at == a.finished_at
    assert a.instructions_seen and a.demographics_done and not a.is_preview and (a.seed, a.panel_study_id) == (0, "")
    b = Participant.objects.get(external_id="pB")
    assert b.status == "exited" and b.finished_at is None and b.imported_attention_passed is None and b.demographics["age"] == "63"
    # Not finished: last seen when its last block was shown (10:03, never submitted).
    assert b.last_seen_at.isoformat() == "2025-03-03T10:03:00+00:00" and b.completion_code == ""
    assert b.demographics_done and b.blocks_assigned == 2
    # Sequence follows block_started_at, not the file order.
    assert list(BlockVisit.objects.filter(participant=a).values_list("block__key", "sequence")) == [("Q2", 1), ("Q1", 2)]
    q1 = BlockVisit.objects.get(participant=a, block__key="Q1")
    assert (q1.submitted_at - q1.shown_at).total_seconds() == 60
    placement = ItemPlacement.objects.get(visit=q1, item__key="Q1-R2")
    assert (placement.position, placement.rank, placement.ratings.get().value) == (4, 4, 2)
    unsubmitted = BlockVisit.objects.get(participant=b, block__key="Q2")
    assert unsubmitted.submitted_at is None and unsubmitted.placements.count() == 5
    assert not Rating.objects.filter(placement__visit=unsubmitted).exists()


def test_importing_the_same_files_twice_changes_nothing(tide):
    run_import(tide)
    counts = (Participant.objects.count(), BlockVisit.objects.count(), ItemPlacement.objects.count(), Rating.objects.count())
    again = run_import(tide)
    assert (again.participants_created, again.participants_skipped, again.ratings_created) == (0, 2, 0)
    assert counts == (Participant.objects.count(), BlockVisit.objects.count(), ItemPlacement.objects.count(), Rating.objects.count())


def test_it_accepts_binary_uploads(tide):
    report = responses_import(
        study=tide,
        participants_file=io.BytesIO(b"\xef\xbb\xbf" + csv_text(base_participants()).encode()),
        ratings_file=io.BytesIO(csv_text(base_ratings()).encode()),
    )
    assert report.ratings_created == 15


def _set(rows, line, column, value, header):
    rows[line - 1][header.index(column)] = value
    return rows


def ratings_with(line, column, value):
    return _set(base_ratings(), line, column, value, R_HEADER)


def participants_with(line, column, value):
    return _set(base_participants(), line, column, value, P_HEADER)


@pytest.mark.parametrize(
    ("participants", "ratings", "expected"),
    [
        (None, ratings_with(3, "block_id", "Q99"), 'ratings.csv:3:block_id: unknown block "Q99"'),
        (None, ratings_with(3, "response_id", "Q1-R9"), 'ratings.csv:3:response_id: unknown response "Q1-R9"'),
        (None, ratings_with(3, "response_id", "Q7-R2"), 'ratings.csv:3:response_id: response "Q7-R2" is not in block "Q1"'),
        (None, ratings_with(4, "rating", "6"), "ratings.csv:4:rating: 6 is outside the empathy scale 1-5"),
        (None, ratings_with(4, "rating", "0"), "ratings.csv:4:rating: 0 is outside the empathy scale 1-5"),
        (None, ratings_with(4, "rating", "3.5"), 'ratings.csv:4:rating: "3.5" is not a whole number'),
        (None, ratings_with(4, "rating", ""), "ratings.csv:4:rating: empty, but the block was submitted"),
        (None, ratings_with(3, "rank", "1"), "ratings.csv:2:rank: ranks in block Q1 of participant pA are [5, 1, 3, 2, 1]"),
        (None, ratings_with(3, "rank", ""), "ratings.csv:2:rank: ranks in block Q1 of participant pA are [5, , 3, 2, 1]"),
        (None, ratings_with(3, "rank", "x"), 'ratings.csv:3:rank: "x" is not a rank'),
        (None, ratings_with(3, "response_id", "Q1-R1"), 'ratings.csv:3:response_id: response "Q1-R1" is listed twice for this participant'),
        (None, ratings_with(3, "position", "5"), "ratings.csv:3:position: position 5 is used twice in block Q1"),
        (None, ratings_with(3, "position", "0"), 'ratings.csv:3:position: "0" is not a position'),
        (None, ratings_with(3, "block_started_at", "yesterday"), 'ratings.csv:3:block_started_at: "yesterday" is not an ISO 8601 time'),
        (None, ratings_with(3, "block_submitted_at", "2025-13-01T00:00:00"), "ratings.csv:3:block_submitted_at: \"2025-13-01T00:00:00\" is not an ISO 8601 time"),
        (None, ratings_with(3, "block_submitted_at", "2025-03-03T09:00:00Z"), "ratings.csv:3:block_submitted_at: before block_started_at"),
        (None, ratings_with(3, "block_started_at", "2025-03-03T09:04:00Z"), "ratings.csv:3:block_started_at: the block times differ from line 2"),
        (None, ratings_with(3, "participant_id", "pZ"), 'ratings.csv:3:participant_id: unknown participant "pZ" (not in the participants file)'),
        (participants_with(2, "attention_passed", "maybe"), None, 'participants.csv:2:attention_passed: "maybe" is not a boolean'),
        (participants_with(2, "started_at", "03/03/2025"), None, 'participants.csv:2:started_at: "03/03/2025" is not an ISO 8601 time'),
        (participants_with(2, "started_at", ""), None, "participants.csv:2:started_at: empty; a start time is required"),
        (participants_with(2, "finished_at", "2025-03-03T08:00:00Z"), None, "participants.csv:2:finished_at: before started_at"),
        (participants_with(2, "state", "XX"), None, 'participants.csv:2:state: "XX" is not an answer of state; the study\'s answers are "AL", "AK"'),
        (participants_with(2, "gender", "robot"), None, 'participants.csv:2:gender: "robot" is not an answer of gender; the study\'s answers are "Woman", "Man", "Non-binary", "Other/Unknown", "Prefer not to answer"'),
        (participants_with(2, "age", "12"), None, 'participants.csv:2:age: "12" is not an answer of age: Please enter a number from 18 to 100.'),
        (participants_with(2, "age", "30-39"), None, 'participants.csv:2:age: "30-39" is not an answer of age: Please enter a number from 18 to 100.'),
        (participants_with(2, "education", "Some college, no degree"), None, 'participants.csv:2:education: "Some college, no degree" is not an answer of education'),
        (participants_with(3, "participant_id", "pA"), None, 'participants.csv:3:participant_id: "pA" is listed twice (first on line 2)'),
        (participants_with(2, "participant_id", ""), None, "participants.csv:2:participant_id: empty participant id"),
    ],
)
def test_it_reports_each_problem_with_file_line_and_column(tide, participants, ratings, expected):
    problems = problems_of(tide, participants, ratings)
    assert any(p.startswith(expected) for p in problems), problems


def test_it_reports_missing_and_unknown_columns_on_line_1(tide):
    participants = [row[:-1] for row in base_participants()]
    ratings = [row + ["x"] for row in base_ratings()]
    ratings[0][-1] = "comment"
    problems = problems_of(tide, participants, ratings)
    assert "participants.csv:1:state: missing column" in problems
    assert any(p.startswith("ratings.csv:1:comment: unknown column") for p in problems)


def test_it_reports_rows_with_the_wrong_number_of_fields(tide):
    ratings = base_ratings()
    ratings[5] = ratings[5][:-2]
    assert any(p.startswith("ratings.csv:6:: expected 8 fields, found 6") for p in problems_of(tide, None, ratings))


def test_it_lists_every_problem_not_just_the_first(tide):
    ratings = ratings_with(3, "block_id", "Q99")
    ratings[9][R_HEADER.index("rating")] = "9"
    problems = problems_of(tide, participants_with(3, "state", "ZZ"), ratings)
    assert len(problems) == 3


def test_a_live_participant_with_the_same_id_is_not_overwritten(tide):
    Participant.objects.create(study=tide, external_id="pA", pseudonym="p_live")
    with pytest.raises(ImportProblems) as caught:
        run_import(tide)
    assert caught.value.problems == ['participants.csv:2:participant_id: "pA" already took part in the survey itself']
    assert Participant.objects.count() == 1


def test_a_study_with_several_dimensions_needs_the_dimension_column(counselor):
    # The counselor study asks its own questions: its participants.csv has their columns.
    participants = [P_HEADER[:4] + ["experience_years", "role"],
                    ["c1", "2025-03-03T09:00:00Z", "2025-03-03T09:20:00Z", "true", "12", "counselor"]]
    rows = [R_HEADER + ["dimension"]]
    for k, response in enumerate(["B1-base", "B1-ft"], start=1):
        for d, dimension in enumerate(["resonance", "coherence", "advice"]):
            rows.append(["c1", "B1", response, str(k), str(1 + (k + d) % 5), "", "2025-03-03T09:01:00Z",
                         "2025-03-03T09:02:00Z", dimension])
    report = run_import(counselor, participants, rows)
    assert (report.placements_created, report.ratings_created) == (2, 6)
    assert Participant.objects.get(external_id="c1").demographics == {"experience_years": "12", "role": "Counselor"}
    without = [row[:-1] for row in rows]
    assert problems_of_study_with_rows(counselor, participants, without) == [
        "ratings.csv:1:dimension: missing column; the study rates resonance, coherence, advice"
    ]


def problems_of_study_with_rows(study, participants, ratings):
    with pytest.raises(ImportProblems) as caught:
        run_import(study, participants, ratings)
    return caught.value.problems


def test_the_command_imports_and_reports_problems(tide, tmp_path, capsys):
    (tmp_path / "p.csv").write_text(csv_text(base_participants()))
    (tmp_path / "r.csv").write_text(csv_text(base_ratings()))
    call_command("import_responses", "--study", "tide", "--participants", str(tmp_path / "p.csv"), "--ratings", str(tmp_path / "r.csv"))
    assert "imported 2 participant(s)" in capsys.readouterr().out
    (tmp_path / "bad.csv").write_text(csv_text(ratings_with(3, "block_id", "Q99")))
    with pytest.raises(CommandError, match="nothing imported: 1 problem"):
        call_command("import_responses", "--study", "tide", "--participants", str(tmp_path / "p.csv"), "--ratings", str(tmp_path / "bad.csv"))
    assert 'bad.csv:3:block_id: unknown block "Q99"' in capsys.readouterr().err


def test_it_imports_gold_scores_and_reimports_them_unchanged(tide, tmp_path, capsys):
    gold = "response_id,gold_score\nQ1-R1,4.333\nQ1-R2,2\n"
    report = gold_import(study=tide, gold_file=io.StringIO(gold))
    assert (report.scores_written, report.scores_unchanged) == (2, 0)
    assert GoldScore.objects.get(item__key="Q1-R1").score == 4.333
    (tmp_path / "gold.csv").write_text(gold.replace("4.333", "4.5"))
    call_command("import_gold", "--study", "tide", str(tmp_path / "gold.csv"))
    assert "1 written, 1 unchanged" in capsys.readouterr().out
    assert GoldScore.objects.get(item__key="Q1-R1").score == 4.5


@pytest.mark.parametrize(
    ("gold", "expected"),
    [
        ("response_id,gold_score\nQ1-R9,3\n", 'gold.csv:2:response_id: unknown response "Q1-R9"'),
        ("response_id,gold_score\nQ1-R1,high\n", 'gold.csv:2:gold_score: "high" is not a number'),
        ("response_id,gold_score\nQ1-R1,nan\n", 'gold.csv:2:gold_score: "nan" is not a number'),
        ("response_id,gold_score\nQ1-R1,3\nQ1-R1,4\n", 'gold.csv:3:response_id: "Q1-R1" is listed twice (first on line 2)'),
        ("response_id,score\nQ1-R1,3\n", "gold.csv:1:gold_score: missing column"),
    ],
)
def test_it_rejects_bad_gold_files_whole(tide, gold, expected):
    with pytest.raises(ImportProblems) as caught:
        gold_import(study=tide, gold_file=io.StringIO(gold))
    assert expected in caught.value.problems
    assert not GoldScore.objects.exists()


def test_an_import_refreshes_the_planner_statistics_on_postgresql(tide):
    from django.db import connection

    if connection.vendor != "postgresql":
        pytest.skip("planner statistics are PostgreSQL's (SQLite plans without them)")
    run_import(tide)
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT relname, reltuples FROM pg_class WHERE relname IN "
            "('surveys_participant', 'surveys_blockvisit', 'surveys_itemplacement', 'surveys_rating')"
        )
        estimated = dict(cursor.fetchall())
    # Never analyzed is -1; ANALYZE records what the import wrote (2, 4, 20, 15 rows).
    assert estimated == {"surveys_participant": 2, "surveys_blockvisit": 4,
                         "surveys_itemplacement": 20, "surveys_rating": 15}


# --- the fast ratings.csv reader (analysis.imports.csv_columns.columns_fast and helpers) ---------------------


def python_micros(text: str) -> float:
    try:
        return float((iso_times.parse_time(text) - iso_times.EPOCH) // timedelta(microseconds=1))
    except ValueError:
        return math.nan


def same_micros(got, expected) -> bool:
    return all((math.isnan(a) and math.isnan(b)) or a == b for a, b in zip(got, expected, strict=True))


TIME_TEXTS = [
    "2025-03-03T09:00:00Z", "2025-03-03T09:00:00", "2025-03-03 09:00:00Z", "2025-03-03T09:00:00+00:00",
    "2025-03-03T09:00:00-00:00", "2025-03-03T09:00:00+05:30", "2025-03-03T09:00:00-23:59", "2025-03-03T09:00:00+23:59",
    "2025-03-03T09:00:00.5Z", "2025-03-03T09:00:00.25", "2025-03-03T09:00:00.123+02:00", "2025-03-03T09:00:00.123456Z",
    "2025-03-03T09:00:00.000001-07:00", "2025-03-03T09:00:00.1234567Z", "2025-03-03T09:00:00.123456789",
    "2025-03-03T09:00:00,5Z", "2025-03-03T09:00:00.Z", "2024-02-29T12:00:00Z", "2025-02-29T12:00:00Z",
    "2100-02-29T12:00:00Z", "2000-02-29T23:59:59.999999+00:00", "2025-04-31T00:00:00", "2025-13-01T00:00:00",
    "2025-00-10T00:00:00", "2025-01-00T00:00:00", "2025-03-03T24:00:00Z", "2025-03-03T23:60:00Z",
    "2025-03-03T23:59:60Z", "2025-03-03T09:00:00+24:00", "2025-03-03T09:00:00-24:00", "2025-03-03T09:00:00+05:60",
    "2025-03-03T09:00:00+05", "2025-03-03T09:00:00+0530", "2025-03-03T09:00:00+05:30:15", "2025-03-03T09:00:00Z+00:00",
    "1899-12-31T23:59:59Z", "1900-01-01T00:00:00Z", "2199-12-31T23:59:59.999999Z", "2200-01-01T00:00:00Z",
    "0001-01-01T00:00:00", "9999-12-31T23:59:59", "2025-03-03", "2025-03-03T09:00Z", "2025-03-03T09",
    "20250303T090000Z", "2025-03-03t09:00:00", "2025-03-03T09:00:00z", "2025-03-03_09:00:00",
    "2025-03-03\u00a009:00:00", "2025-03-03T09:00:00\u00a0", " 2025-03-03T09:00:00Z", "2025-03-03T09:00:00Z ",
    "202\u0665-03-03T09:00:00Z", "2025-03-03T09:00:0\uff10Z", "2025-03-03T09:00:00Z\x00", "2025-03-03T09:00:0\x00",
    "2025/03/03T09:00:00Z", "yesterday", "", "Z", "2025-03-03T09:00:00.5+05:30 and more",
]


def test_the_vectorized_time_parse_agrees_with_parse_time():
    texts = np.array(TIME_TEXTS, dtype=object)
    assert same_micros(iso_times.time_micros(texts), [python_micros(t) for t in TIME_TEXTS])


def test_the_time_parse_from_bytes_agrees_with_parse_time():
    texts = [t for t in TIME_TEXTS if "\x00" not in t]  # cells with NUL bytes are kept as str
    encoded = [t.encode() for t in texts]
    cells = np.zeros((len(texts), max(map(len, encoded))), dtype=np.uint8)
    for i, raw in enumerate(encoded):
        cells[i, : len(raw)] = list(raw)
    column = csv_columns.Column(np.arange(len(texts)), raw=(cells, np.array([len(raw) for raw in encoded])))
    assert same_micros(csv_columns.parse_times(column), [python_micros(t) for t in texts])
    assert column._texts is None  # read without decoding every text


def test_the_vectorized_time_parse_covers_the_usual_layouts_and_agrees_on_them():
    rnd = random.Random(7)
    texts = []
    for _ in range(3000):
        moment = datetime(1900, 1, 1) + timedelta(seconds=rnd.randrange(300 * 365 * 86400))
        text = moment.strftime(rnd.choice(["%Y-%m-%dT%H:%M:%S", "%Y-%m-%d %H:%M:%S"]))
        if rnd.random() < 0.5:
            text += "." + str(rnd.randrange(10**6)).zfill(6)[: rnd.randint(1, 6)]
        hours, minutes = rnd.randrange(24), rnd.randrange(60)
        text += rnd.choice(["", "Z", f"+{hours:02d}:{minutes:02d}", f"-{hours:02d}:{minutes:02d}"])
        texts.append(text)
    expected = [python_micros(t) for t in texts]
    strict = [t for t, e in zip(texts, expected) if 1900 <= int(t[:4]) <= 2199]
    # The numpy path alone (no fallback) reads every text of the usual layouts within its years ...
    points = np.array(strict, dtype="U32").view(np.uint32).reshape(len(strict), 32)
    chars = np.minimum(points, 255).astype(np.uint8).T.copy()
    lengths = np.array([len(t) for t in strict])
    assert not np.isnan(iso_times.strict_iso_micros(chars, lengths)).any()
    # ... and with the fallback, every text agrees with parse_time.
    assert same_micros(iso_times.time_micros(np.array(texts, dtype=object)), expected)


def upload(content: str, binary: bool) -> csv_columns.Upload:
    return csv_columns.Upload(io.BytesIO(content.encode()) if binary else io.StringIO(content))


def fast_and_exact(content: str, binary: bool) -> tuple:
    header = next(csv.reader(io.StringIO(content)))
    problems = importers._Problems()
    fast = csv_columns.columns_fast(upload(content, binary), header)
    exact = csv_columns.columns_exact(content, header, "ratings.csv", problems)
    return header, fast, exact, problems.items


def cells_by_row(read, header) -> tuple[list[int], list[list[str]]]:
    lines, columns = read
    return lines.tolist(), [list(row) for row in zip(*(columns[c].texts[columns[c].codes] for c in header))]


LONG_ID = "participant-with-a-rather-long-id-" + "x" * 40


@pytest.mark.parametrize("binary", [False, True])
@pytest.mark.parametrize("ids", [
    ["pA", "pA", "12345678", "123456789", "1234567", LONG_ID],  # ASCII: bytes read as they come
    ["pA", "Zoë", "参加者", "Zoë"],  # UTF-8
    ["pA", " pad ", "\tpB", "pad"],  # stripped
])
@pytest.mark.parametrize("layout", ["plain", "blank line", "no final newline", "crlf"])
def test_the_fast_reader_cuts_the_cells_the_csv_module_does(ids, layout, binary):
    rows = [R_HEADER] + [
        [pid, "Q1", f"Q1-R{k}", str(k), str(k), str(6 - k), "2025-03-03T09:05:00Z", "2025-03-03T09:06:00.123456+01:00"]
        for pid in ids for k in (1, 2)
    ]
    ending = "\r\n" if layout == "crlf" else "\n"
    lines = [",".join(row) for row in rows]
    if layout == "blank line":
        lines.insert(3, "")
    content = ending.join(lines) + ("" if layout == "no final newline" else ending)
    header, fast, exact, problems = fast_and_exact(content, binary)
    assert fast is not None and problems == []
    assert cells_by_row(fast, header) == cells_by_row(exact, header)
    assert len(fast[0]) == len(rows) - 1


@pytest.mark.parametrize("binary", [False, True])
def test_the_fast_reader_keeps_nul_bytes_apart(binary):
    content = csv_text([R_HEADER, ["p\x00", "Q1", "Q1-R1", "1", "1", "1", "t", ""], ["p", "Q1", "Q1-R1", "1", "1", "1", "t", ""],
                   ["p\x00\x00", "Q1", "Q1-R1", "1", "1", "1", "t", "\x00"]])
    header, fast, exact, _ = fast_and_exact(content, binary)
    assert cells_by_row(fast, header) == cells_by_row(exact, header)
    assert list(fast[1]["participant_id"].texts) == ["p\x00", "p", "p\x00\x00"]


def test_lines_with_too_many_or_too_few_fields_are_found_by_counting_commas(tide):
    lines = csv_text(base_ratings()).split("\r\n")
    lines[3] += ",extra"  # line 4
    lines[7] = lines[7].rsplit(",", 2)[0]  # line 8
    content = "\n".join(lines)
    assert csv_columns.columns_fast(upload(content, True), R_HEADER) is None  # left to the csv module, which names the lines
    with pytest.raises(ImportProblems) as caught:
        responses_import(study=tide, participants_file=io.StringIO(csv_text(base_participants())),
                         ratings_file=io.StringIO(content))
    assert caught.value.problems[:2] == ["ratings.csv:4:: expected 8 fields, found 9",
                                         "ratings.csv:8:: expected 8 fields, found 6"]


def test_blank_lines_keep_the_fast_reader_and_the_line_numbers():
    lines = csv_text(base_ratings()).split("\r\n")
    content = "\n".join(lines[:3] + ["", ""] + lines[3:])
    read = csv_columns.columns_fast(upload(content, True), R_HEADER)
    assert read is not None
    assert read[0].tolist() == [2, 3] + list(range(6, len(lines) + 2))
