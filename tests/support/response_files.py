"""Small responses files (participants.csv, ratings.csv) of two participants on TIDE's Q1 and Q2, for the import tests."""

from __future__ import annotations

import csv
import io

P_HEADER = ["participant_id", "started_at", "finished_at", "attention_passed", "age", "sex", "gender", "race",
            "hispanic", "education", "employment", "state"]
R_HEADER = ["participant_id", "block_id", "response_id", "position", "rating", "rank", "block_started_at",
            "block_submitted_at"]


def base_participants() -> list[list[str]]:
    return [
        P_HEADER,
        ["pA", "2025-03-03T09:00:00Z", "2025-03-03T09:30:00Z", "true", "34", "female", " woman ", "White",
         "No", "bachelor's degree", "Student", "ca"],
        ["pB", "2025-03-03T10:00:00+00:00", "", "", "63", "Male", "Man", "Asian", "", "", "", ""],
    ]


def base_ratings() -> list[list[str]]:
    rows = [R_HEADER]
    # pA shows Q2 before Q1 (file order is not display order); pB left after Q1 without submitting Q2.
    plan = [("pA", "Q1", "2025-03-03T09:05:00Z", "2025-03-03T09:06:00Z"),
            ("pA", "Q2", "2025-03-03T09:01:00Z", "2025-03-03T09:02:30Z"),
            ("pB", "Q1", "2025-03-03T10:01:00Z", "2025-03-03T10:02:00Z"),
            ("pB", "Q2", "2025-03-03T10:03:00Z", "")]
    for pid, block, start, end in plan:
        for k in range(1, 6):
            answered = end != ""
            rows.append([pid, block, f"{block}-R{k}", str(6 - k), str(k) if answered else "",
                         str(6 - k) if answered else "", start, end])
    return rows


def csv_text(rows: list[list[str]]) -> str:
    out = io.StringIO()
    csv.writer(out).writerows(rows)
    return out.getvalue()


def csv_file(rows: list[list[str]], name: str) -> io.BytesIO:
    """``rows`` as an uploaded file called ``name`` (for a multipart POST)."""
    handle = io.BytesIO(csv_text(rows).encode())
    handle.name = name
    return handle
