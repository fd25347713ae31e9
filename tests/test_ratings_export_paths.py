"""ratings.csv written a column at a time (``exports.csv_cells``) from frames streamed a few participants at a
time (``frames.ratings_frames``: on PostgreSQL one joined pass read ahead on a helper connection, elsewhere
``ratings_frame`` per group) gives the bytes of the value-by-value path: ``csv_cell`` of each value of
``ratings_frame``, written by ``csv.writer``."""

from __future__ import annotations

import copy
import csv
import io
import threading
from datetime import datetime, timezone

import numpy as np
import pandas as pd
import pytest
from django.db import connection, transaction
from django.test import Client

from analysis import frames, pgcopy
from analysis.exporting import exports
from analysis.exporting.exports import csv_cell, csv_cells
from analysis.frames import ratings_frame, ratings_frames
from analysis.models import ParticipantResult
from analysis.selectors import retained_participant_ids
from surveys.definition import parse_definition
from surveys.loader import study_load
from surveys.questions.rating import RATINGS_COLUMNS
from tests.support.researcher import fill_with_bots, finished_run

# Model names a spreadsheet would run as formulas, or that need quoting or UTF-8.
TRICKY_SYSTEMS = ['=HYPERLINK("http://evil.example","click")', "+cmd|' /C calc'!A0", "-2+3", "@SUM(A1)",
                  'Modèle "é", 中文', "\tTabbed", "Line\nbreak"]


def test_csv_cells_are_csv_cell_of_each_value():
    labels = pd.Categorical(["=1+1", "café", None, "a,b", '"q"', "-x", "中文", "=1+1"],
                            categories=["=1+1", "café", "a,b", '"q"', "-x", "中文", "unused"])
    floats = [0.1, -0.0, 0.0, np.nan, np.inf, -np.inf, 1e16, 45.5]
    columns = {
        "labels": (pd.Series(labels), [None if v is None or v != v else v for v in labels.tolist()]),
        "flags": (pd.Series(pd.array([True, None, False], dtype="boolean")), [True, None, False]),
        "numpy flags": (pd.Series(np.array([True, False])), [True, False]),
        "integers": (pd.Series(np.array([3, -3, 0, 3], dtype=np.int64)), [3, -3, 0, 3]),
        "floats": (pd.Series(np.array(floats)), floats),
        "texts": (pd.Series(["+a", None, datetime(2025, 3, 3, 9, tzinfo=timezone.utc), 7], dtype=object),
                  ["+a", None, datetime(2025, 3, 3, 9, tzinfo=timezone.utc), 7]),
    }
    for name, (column, values) in columns.items():
        assert csv_cells(column).tolist() == [csv_cell(value) for value in values], name
    whole = pd.Series(np.array([1.0, np.nan, -2.0, 5.0]))
    assert csv_cells(whole, whole=True).tolist() == ["1", "", "-2", "5"]
    assert csv_cells(pd.Series(np.array([-0.0, 0.0]))).tolist() == ["-0.0", "0.0"]  # one bit pattern per text


def _value_by_value_csv(study, run) -> bytes:
    """ratings.csv as the exports wrote it before: csv_cell of each value of ratings_frame of the retained."""
    retained = sorted(ParticipantResult.objects.filter(run=run, excluded_by="").values_list("participant_id", flat=True))
    frame = ratings_frame(study.pk, participant_ids=retained)
    whole = {"position", "rating", "rank", "block_order"}
    text = io.StringIO()
    writer = csv.writer(text)
    writer.writerow(RATINGS_COLUMNS)
    for record in frame[RATINGS_COLUMNS].itertuples(index=False):
        cells = []
        for name, value in zip(RATINGS_COLUMNS, record):
            value = value.item() if isinstance(value, np.generic) else value
            missing = value is None or value is pd.NA or (isinstance(value, float) and value != value)
            cells.append("" if missing else str(int(value)) if name in whole else csv_cell(value))
        writer.writerow(cells)
    return text.getvalue().encode("utf-8")


@pytest.fixture
def tricky_study(transactional_db, tide_definition, owner):
    """TIDE with model names that start formulas, hold commas, quotes, a newline and non-ASCII text; bots;
    a finished run. Committed (transactional_db): the helper connection of the PostgreSQL path reads it."""
    definition = copy.deepcopy(tide_definition)
    renamed = dict(zip(definition["systems"], TRICKY_SYSTEMS))
    definition["slug"] = "tricky"
    definition["systems"] = [renamed.get(name, name) for name in definition["systems"]]
    for block in definition["blocks"]:
        for response in block["responses"]:
            response["system"] = renamed.get(response["system"], response["system"])
    study = study_load(definition=parse_definition(definition)).study
    study.owners.add(owner)
    fill_with_bots(study, 12, seed=5)
    return study


def test_ratings_csv_is_the_value_by_value_csv_on_every_path(tricky_study, owner, quick_stats, monkeypatch):
    run = finished_run(tricky_study)
    expected = _value_by_value_csv(tricky_study, run)
    assert b"'=HYPERLINK(" in expected and "Modèle".encode() in expected and b'"Line\nbreak"' in expected
    monkeypatch.setattr(exports, "_PARTICIPANTS_PER_FRAME", 3)  # several frames, one split of each kind
    monkeypatch.setattr(exports, "_ROWS_PER_BATCH", 50)
    client = Client()
    client.force_login(owner)

    def download() -> bytes:
        response = client.get(f"/studies/{tricky_study.slug}/exports/ratings.csv")
        assert response.status_code == 200
        return b"".join(response.streaming_content)

    assert download() == expected  # outside a transaction: on PostgreSQL, read ahead on a helper connection
    with transaction.atomic():
        assert download() == expected  # inside one: on the caller's connection
    assert expected.count(b"\r\n") > 100


def test_frames_streamed_are_ratings_frame_of_the_same_participants(tricky_study, quick_stats):
    run = finished_run(tricky_study)
    retained = sorted(ParticipantResult.objects.filter(run=run, excluded_by="").values_list("participant_id", flat=True))
    assert 3 < len(retained)
    parts = list(ratings_frames(tricky_study.pk, participants=retained_participant_ids(run=run), per_frame=2))
    assert len(parts) > 1
    streamed = pd.concat(parts, ignore_index=True)
    whole = ratings_frame(tricky_study.pk, participant_ids=retained)
    labels = {name: str for name in frames.RATING_COLUMNS[:7]}  # categories differ between frames
    pd.testing.assert_frame_equal(streamed.astype(labels), whole.astype(labels))


@pytest.mark.skipif(connection.vendor != "postgresql", reason="the read-ahead helper is PostgreSQL's")
def test_a_cancelled_download_stops_the_reader_and_leaves_the_connection_usable(tricky_study, quick_stats):
    run = finished_run(tricky_study)
    batches = pgcopy.int_row_batches("SELECT participant_id, id FROM surveys_blockvisit", [], 2, groups_per_batch=1)
    first = next(batches)
    assert len(np.unique(first[:, 0])) == 1
    batches.close()  # as Django closes a streamed response whose client went away
    assert not [thread for thread in threading.enumerate() if thread.name == "int_row_batches"]
    assert ParticipantResult.objects.filter(run=run).exists()
