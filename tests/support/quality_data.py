"""Generated TIDE data with planted behaviours, and the truth about them.

Each planted participant states which quality rules must flag it on its own
(``flags``), so the expected ``excluded_by`` (the first of those in rule
order), the flow table and the payment decision are known without running
the code under test. Deterministic: no random numbers.

Near-misses sit exactly on the boundaries of DESIGN 3.2: 10.0 and 75.0
minutes, exactly 25 % fast blocks, a block of exactly 10 s, low SD with a
good MAE, a high MAE with varied ratings, and an empty attention outcome.

``python -m tests.support.quality_data OUT_DIR [N]`` writes a big honest data set
(N participants x 24 blocks x 5 responses) for the import benchmark.
"""

from __future__ import annotations

import csv
import io
import json
import statistics
import sys
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from pathlib import Path

from tests.support.paths import FIXTURES

RULES = ("incomplete", "attention", "duration", "speed", "straightlining")
FIXTURE = FIXTURES / "tide.json"
T0 = datetime(2025, 3, 3, 9, 0, tzinfo=timezone.utc)
PARTICIPANT_HEADER = ["participant_id", "started_at", "finished_at", "attention_passed", "age", "sex", "gender",
                      "race", "hispanic", "education", "employment", "state"]
RATING_HEADER = ["participant_id", "block_id", "response_id", "position", "rating", "rank",
                 "block_started_at", "block_submitted_at"]
GENDERS = ["Woman", "Man", "Non-binary", ""]


def tide_blocks() -> list[tuple[str, list[str]]]:
    definition = json.loads(FIXTURE.read_text())
    return [(b["id"], [r["id"] for r in b["responses"]]) for b in definition["blocks"]]


def gold_scores(blocks: list[tuple[str, list[str]]]) -> dict[str, float]:
    """Gold in {2, 2.5, 3, 3.5, 4}, cycling over the responses."""
    return {
        response: 2.0 + 0.5 * ((b * 5 + k) % 5)
        for b, (_block, responses) in enumerate(blocks)
        for k, response in enumerate(responses)
    }


def honest_rating(gold: float, i: int) -> int:
    return min(5, max(1, int(gold + 0.5) + (0, 1, 0, -1, 0)[i % 5]))


@dataclass
class Planted:
    external_id: str
    kind: str
    flags: set[str]
    duration_minutes: float | None  # None: never finished
    gender: str = "Woman"
    attention: str = "true"  # imported outcome ("true"/"false"/"")
    failed_checks: int = 0  # live participants only
    live: bool = False
    ratings: str = "honest"  # honest | constant1 | constant3 | opposite
    block_seconds: list[float] = field(default_factory=lambda: [40.0] * 24)
    blocks_answered: int = 24
    blocks_shown: int = 24

    @property
    def excluded_by(self) -> str:
        return next((rule for rule in RULES if rule in self.flags), "")

    @property
    def completed(self) -> bool:
        return self.duration_minutes is not None


def _fast(n_fast: int, fast_seconds: float = 5.0, extra: dict[int, float] | None = None) -> list[float]:
    seconds = [fast_seconds if i < n_fast else 40.0 for i in range(24)]
    for i, value in (extra or {}).items():
        seconds[i] = value
    return seconds


def planted_population(n_honest: int = 200) -> list[Planted]:
    short = [15.0] * 24  # blocks that fit a short session, still not fast
    people = [
        Planted(f"honest{i:03d}", "honest", set(), 28.0 + (i % 5), gender=GENDERS[i % 4])
        for i in range(n_honest)
    ]
    people += [
        # culprits
        Planted("exit_early", "exit", {"incomplete"}, None, blocks_answered=10, blocks_shown=11),
        Planted("exit_and_failed", "exit", {"incomplete", "attention"}, None, attention="false",
                blocks_answered=5, blocks_shown=6, gender="Man"),
        Planted("finished_missing_block", "missing block", {"incomplete"}, 30.0, blocks_answered=23),
        Planted("failed_check", "attention", {"attention"}, 30.0, attention="false"),
        Planted("failed_and_fast", "attention", {"attention", "speed"}, 30.0, attention="false",
                block_seconds=_fast(12), gender="Man"),
        Planted("too_short", "duration", {"duration"}, 9.5, block_seconds=short),
        Planted("too_long", "duration", {"duration"}, 76.0, gender="Man"),
        Planted("short_straightliner", "duration", {"duration", "straightlining"}, 9.0, ratings="constant1",
                block_seconds=short),
        Planted("speeder", "speed", {"speed"}, 30.0, block_seconds=_fast(7)),
        Planted("speeder_straightliner", "speed", {"speed", "straightlining"}, 30.0, ratings="constant1",
                block_seconds=_fast(20), gender=""),
        Planted("straightliner", "straightlining", {"straightlining"}, 30.0, ratings="constant1"),
        Planted("straightliner_man", "straightlining", {"straightlining"}, 31.0, ratings="constant1", gender="Man"),
        # near-misses: all retained
        Planted("exactly_10_minutes", "near miss", set(), 10.0, block_seconds=short),
        Planted("exactly_75_minutes", "near miss", set(), 75.0),
        Planted("quarter_fast_with_10s_block", "near miss", set(), 30.0, block_seconds=_fast(6, 9.0, {6: 10.0})),
        Planted("low_sd_good_mae", "near miss", set(), 30.0, ratings="constant3"),
        Planted("high_mae_varied", "near miss", set(), 30.0, ratings="opposite"),
        Planted("attention_not_reached", "near miss", set(), 30.0, attention=""),
        # live participants (their checks are BlockVisit rows)
        Planted("live_honest", "live", set(), 28.0, live=True),
        Planted("live_one_failure", "live attention", {"attention"}, 28.0, live=True, failed_checks=1),
        Planted("live_two_failures", "live attention", {"attention"}, 28.0, live=True, failed_checks=2, gender="Man"),
        Planted("live_in_progress", "live exit", {"incomplete"}, None, live=True, blocks_answered=3, blocks_shown=4),
    ]
    return people


def too_fast_cutoff(people: list[Planted]) -> float:
    """Mean - 3 SD of completed participants' durations, computed independently with ``statistics``."""
    durations = [p.duration_minutes for p in people if p.completed]
    return statistics.mean(durations) - 3 * statistics.stdev(durations)


def expected_reject_reason(p: Planted, people: list[Planted]) -> str:
    durations = [q.duration_minutes for q in people if q.completed]
    if p.failed_checks >= 2 and statistics.median(durations) >= 5:
        return "failed_attention_checks"
    if p.completed and p.duration_minutes < too_fast_cutoff(people):
        return "too_fast"
    return ""


def expected_flow(people: list[Planted]) -> list[dict]:
    remaining = len(people)
    rows = [{"step": 0, "rule": "enrolled", "excluded": 0, "remaining": remaining, "flagged_alone": 0}]
    for step, rule in enumerate(RULES, start=1):
        excluded = sum(p.excluded_by == rule for p in people)
        remaining -= excluded
        rows.append({"step": step, "rule": rule, "excluded": excluded, "remaining": remaining,
                     "flagged_alone": sum(rule in p.flags for p in people)})
    return rows


def _iso(moment: datetime) -> str:
    return moment.isoformat().replace("+00:00", "Z")


def planned_ratings(p: Planted, responses: list[str], gold: dict[str, float], b: int) -> list[int]:
    golds = [gold[r] for r in responses]
    if p.ratings == "constant1":
        return [1] * len(responses)
    if p.ratings == "constant3":
        return [3] * len(responses)
    if p.ratings == "opposite":
        return [5 if g < 3 else 1 for g in golds]
    return [honest_rating(g, b * 5 + k) for k, g in enumerate(golds)]


def block_plan(p: Planted, index: int, blocks: list[tuple[str, list[str]]], gold: dict[str, float]):
    """Yields (block, responses in display order, ratings, ranks, started, submitted|None) per shown block."""
    start = T0 + timedelta(hours=index)
    clock = start + timedelta(seconds=30)
    for b, (block, responses) in enumerate(blocks[: p.blocks_shown]):
        shift = (index + b) % 5  # rotate the display order
        shown = responses[shift:] + responses[:shift]
        ratings = planned_ratings(p, shown, gold, b)
        order = sorted(range(len(shown)), key=lambda k: (-ratings[k], k))
        ranks = [order.index(k) + 1 for k in range(len(shown))]
        submitted = clock + timedelta(seconds=p.block_seconds[b]) if b < p.blocks_answered else None
        yield block, shown, ratings, ranks, clock, submitted
        clock = (submitted or clock) + timedelta(seconds=5)


def _demographics(i: int, gender: str) -> list[str]:
    states = ["CA", "NY", "TX", "IL", "DC", "", "wa", "Outside the US"]
    ages = ["25", "34", "19", "61", "70", "45", "52", "prefer not to answer"]
    return [ages[i % 8], "female" if gender == "Woman" else ("Male" if gender == "Man" else ""), gender,
            ["White", "Asian", "Black or African American", ""][i % 4], ["No", "yes", ""][i % 3],
            ["Bachelor's degree", "bachelor's DEGREE", "Graduate or professional degree", ""][i % 4],
            ["Working full-time", "Student", "retired", ""][i % 4], states[i % 8]]


@dataclass
class PlantedFiles:
    people: list[Planted]
    participants_csv: str
    ratings_csv: str
    gold_csv: str


def planted_files(people: list[Planted] | None = None) -> PlantedFiles:
    """The CSV texts (DESIGN 3.1) of the imported (non-live) planted participants, and gold.csv."""
    people = people if people is not None else planted_population()
    blocks = tide_blocks()
    gold = gold_scores(blocks)
    p_out, r_out, g_out = io.StringIO(), io.StringIO(), io.StringIO()
    p_csv, r_csv, g_csv = csv.writer(p_out), csv.writer(r_out), csv.writer(g_out)
    p_csv.writerow(PARTICIPANT_HEADER)
    r_csv.writerow(RATING_HEADER)
    for i, p in enumerate(people):
        if p.live:
            continue
        start = T0 + timedelta(hours=i)
        finish = "" if p.duration_minutes is None else _iso(start + timedelta(minutes=p.duration_minutes))
        p_csv.writerow([p.external_id, _iso(start), finish, p.attention, *_demographics(i, p.gender)])
        for block, shown, ratings, ranks, started, submitted in block_plan(p, i, blocks, gold):
            for position, (response, rating, rank) in enumerate(zip(shown, ratings, ranks), start=1):
                answered = submitted is not None
                r_csv.writerow([p.external_id, block, response, position, rating if answered else "",
                                rank if answered else "", _iso(started), _iso(submitted) if answered else ""])
    g_csv.writerow(["response_id", "gold_score"])
    for response, score in gold.items():
        g_csv.writerow([response, score])
    return PlantedFiles(people, p_out.getvalue(), r_out.getvalue(), g_out.getvalue())


def planted_import(study, people: list[Planted]) -> None:
    """Import the files of ``people`` (responses, then gold scores) into ``study``, as a researcher uploads them."""
    from analysis.imports.importers import gold_import, responses_import

    files = planted_files(people)
    responses_import(study=study, participants_file=io.StringIO(files.participants_csv),
                     ratings_file=io.StringIO(files.ratings_csv))
    gold_import(study=study, gold_file=io.StringIO(files.gold_csv))


def live_participants_create(study, people: list[Planted]) -> None:
    """Live planted participants written straight as rows, as the survey flow would leave them.

    Two attention checks are placed after the 8th and 16th block; a participant
    with ``failed_checks`` = k fails the first k of them.
    """
    from surveys.models import AttentionCheck, Block, BlockVisit, Dimension, Item, ItemPlacement, Participant, Rating
    from surveys.pseudonyms import pseudonym_for

    blocks = tide_blocks()
    gold = gold_scores(blocks)
    block_ids = dict(Block.objects.filter(study=study).values_list("key", "id"))
    item_ids = dict(Item.objects.filter(study=study).values_list("key", "id"))
    checks = list(AttentionCheck.objects.filter(study=study).order_by("id"))
    dimension = Dimension.objects.get(study=study)
    for i, p in enumerate(people):
        if not p.live:
            continue
        start = T0 + timedelta(hours=i)
        finished = None if p.duration_minutes is None else start + timedelta(minutes=p.duration_minutes)
        participant = Participant.objects.create(
            study=study, external_id=p.external_id, pseudonym=pseudonym_for(key=study.pseudonym_key, external_id=p.external_id),
            status="completed" if finished else "in_progress", started_at=start, finished_at=finished,
            blocks_assigned=24, completion_code=study.completion_code if finished else "",
            demographics={"age": "35", "state": "OH"} | ({"gender": p.gender} if p.gender else {}),
        )
        sequence = 0
        for b, (block, shown, ratings, ranks, started, submitted) in enumerate(block_plan(p, i, blocks, gold)):
            sequence += 1
            visit = BlockVisit.objects.create(participant=participant, sequence=sequence, block_id=block_ids[block],
                                              shown_at=started, submitted_at=submitted)
            for position, (response, rating, rank) in enumerate(zip(shown, ratings, ranks), start=1):
                placement = ItemPlacement.objects.create(visit=visit, item_id=item_ids[response], position=position,
                                                         rank=rank if submitted else None)
                if submitted:
                    Rating.objects.create(placement=placement, dimension=dimension, value=rating)
            if b in (7, 15) and submitted:
                k = 0 if b == 7 else 1
                sequence += 1
                passed = k >= p.failed_checks
                BlockVisit.objects.create(
                    participant=participant, sequence=sequence, attention_check=checks[k], shown_at=submitted,
                    submitted_at=submitted + timedelta(seconds=5), attention_passed=passed,
                    attention_value=checks[k].expected_value if passed else 1 + checks[k].expected_value % 5,
                )


def write_benchmark_files(out_dir: Path, n_participants: int = 10_000) -> tuple[Path, Path]:
    """participants.csv and ratings.csv of ``n_participants`` honest people x 24 blocks x 5 responses."""
    out_dir.mkdir(parents=True, exist_ok=True)
    blocks = tide_blocks()
    gold = gold_scores(blocks)
    template = Planted("x", "honest", set(), 30.0)
    p_path, r_path = out_dir / "participants.csv", out_dir / "ratings.csv"
    with p_path.open("w", newline="") as p_file, r_path.open("w", newline="") as r_file:
        p_csv, r_csv = csv.writer(p_file), csv.writer(r_file)
        p_csv.writerow(PARTICIPANT_HEADER)
        r_csv.writerow(RATING_HEADER)
        for i in range(n_participants):
            external_id = f"{i:024x}"
            start = T0 + timedelta(minutes=i)
            p_csv.writerow([external_id, _iso(start), _iso(start + timedelta(minutes=25 + i % 11)), "true",
                            *_demographics(i, GENDERS[i % 4])])
            for block, shown, ratings, ranks, started, submitted in block_plan(template, i, blocks, gold):
                s, e = _iso(started), _iso(submitted)
                r_csv.writerows(
                    [external_id, block, response, position, rating, rank, s, e]
                    for position, (response, rating, rank) in enumerate(zip(shown, ratings, ranks), start=1)
                )
    return p_path, r_path


if __name__ == "__main__":
    target = Path(sys.argv[1])
    count = int(sys.argv[2]) if len(sys.argv) > 2 else 10_000
    print(*write_benchmark_files(target, count))
