"""Block, attention-check and demographics pages: what is shown, validated and saved."""

import random
import re
from collections import Counter

import pytest
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.utils.html import escape

from surveys import services
from surveys.models import BlockVisit, FreeTextAnswer, Item, ItemPlacement, Participant, Rating

PID = "a" * 24


def _state():
    """Everything a page submit could change, to prove a rejected one changed nothing."""
    return (
        list(BlockVisit.objects.order_by("pk").values_list("pk", "submitted_at", "attention_value")),
        list(ItemPlacement.objects.order_by("pk").values_list("pk", "rank", "choice")),
        Rating.objects.count(),
        FreeTextAnswer.objects.count(),
        list(Participant.objects.values_list("status", "last_seen_at")),
    )


def test_it_shows_the_scenario_and_five_labelled_responses_in_the_stored_order(client, tide, steps):
    participant = steps.start(client, tide, PID)
    response, spec = steps.page(client, tide)
    html = response.content.decode()
    visit = participant.visits.order_by("sequence").first()
    placements = list(visit.placements.order_by("position").select_related("item"))
    assert spec.placements == [p.pk for p in placements]
    # The scenario is escaped on output (apostrophes become &#x27;).
    assert "Person:" in html and escape(visit.block.scenario.user_input) in html
    positions = [html.index(f"<h2 id=\"response-{p.pk}\">Response {p.position}</h2>") for p in placements]
    assert positions == sorted(positions)
    assert 'Block 1 of 24' in html
    assert '<legend>Response 1: Perceived empathy</legend>' in html
    assert "1 (Not at all empathetic)" in html and "5 (Extremely empathetic)" in html
    assert html.count('<select id="id-rank-') == 5


def test_it_has_no_inline_script_or_event_handler_and_escapes_text(client, tide, steps):
    Item.objects.filter(study=tide).update(text='<script>alert("x")</script> & <b>bold</b>')
    steps.start(client, tide, PID)
    html = steps.page(client, tide)[0].content.decode()
    assert "<script>alert" not in html and "&lt;script&gt;alert" in html
    for script in re.findall(r"<script[^>]*>", html):
        assert "src=" in script
    assert not re.search(r"\son[a-z]+=", html)
    assert 'lang="en"' in html and 'href="#main"' in html


def test_it_saves_a_complete_page_in_one_go_and_moves_on(client, tide, steps):
    steps.start(client, tide, PID)
    response, spec = steps.submit_current(client, tide)
    assert response.status_code == 303 and response["Location"] == "/s/tide/page/"
    visit = BlockVisit.objects.get(pk=spec.visit_id)
    assert visit.submitted_at >= visit.shown_at
    placements = list(visit.placements.order_by("position"))
    assert [p.rank for p in placements] == [1, 2, 3, 4, 5]
    assert list(Rating.objects.filter(placement__visit=visit).values_list("value", flat=True)) == [4] * 5
    assert steps.page(client, tide)[1].visit_id != spec.visit_id


@pytest.mark.parametrize(
    "change, message",
    [
        ("out_of_range", "Please rate Response 2 from 1 to 5."),
        ("missing", "Please rate Response 2 for perceived empathy."),
        ("not_a_number", "Please rate Response 2 from 1 to 5."),
        ("duplicate_rank", "Rank 1 is given to Response 1 and Response 2; give each response a different rank."),
        ("missing_rank", "Please give Response 3 a rank."),
        ("rank_out_of_range", "Please give Response 3 a rank from 1 to 5."),
        ("foreign_item", "Some answers do not belong to this page"),
        ("unknown_dimension", "Some answers do not belong to this page"),
    ],
)
def test_it_rejects_bad_answers_with_a_clear_message_and_changes_nothing(client, tide, steps, change, message):
    steps.start(client, tide, PID)
    _, spec = steps.page(client, tide)
    data = steps.answers(spec)
    p1, p2, p3 = spec.placements[:3]
    other = ItemPlacement.objects.exclude(visit_id=spec.visit_id).first()
    if change == "out_of_range":
        data[f"rate-{p2}-empathy"] = 6
    elif change == "missing":
        del data[f"rate-{p2}-empathy"]
    elif change == "not_a_number":
        data[f"rate-{p2}-empathy"] = "x"
    elif change == "duplicate_rank":
        data[f"rank-{p2}"] = 1
    elif change == "missing_rank":
        del data[f"rank-{p3}"]
    elif change == "rank_out_of_range":
        data[f"rank-{p3}"] = 9
    elif change == "foreign_item":
        data[f"rate-{other.pk}-empathy"] = 3
    elif change == "unknown_dimension":
        data[f"rate-{p1}-kindness"] = 3
    before = _state()
    response = client.post("/s/tide/page/", data)
    html = response.content.decode()
    assert response.status_code == 400
    assert 'class="error-summary"' in html and message in html
    assert _state() == before
    # What was entered is kept: Response 1's rating is still checked.
    assert f'id="id-rate-{p1}-empathy-4" name="rate-{p1}-empathy" value="4" checked' in html


def test_error_messages_sit_next_to_their_fields_and_the_summary_links_to_them(client, tide, steps):
    steps.start(client, tide, PID)
    _, spec = steps.page(client, tide)
    data = steps.answers(spec)
    p2 = spec.placements[1]
    del data[f"rate-{p2}-empathy"]
    html = client.post("/s/tide/page/", data).content.decode()
    assert f'<a href="#id-rate-{p2}-empathy-1">' in html
    assert f'id="fs-rate-{p2}-empathy" aria-describedby="err-rate-{p2}-empathy"' in html
    assert f'<p class="error-message" id="err-rate-{p2}-empathy">' in html


def test_a_rank_given_twice_is_listed_once_naming_the_responses_that_share_it(client, tide, steps):
    steps.start(client, tide, PID)
    _, spec = steps.page(client, tide)
    data = steps.answers(spec)
    p1, p2, p3, p4, p5 = spec.placements
    data.update({f"rank-{p2}": 1, f"rank-{p4}": 1, f"rank-{p5}": 3})  # 1 thrice, 3 twice
    html = client.post("/s/tide/page/", data).content.decode()
    summary = re.search(r'<div class="error-summary".*?</div>', html, re.S).group()
    items = re.findall(r'<li><a href="#([^"]+)">([^<]+)</a></li>', summary)
    assert items == [
        (f"id-rank-{p1}", "Rank 1 is given to Response 1, Response 2 and Response 4; give each response a different rank."),
        (f"id-rank-{p3}", "Rank 3 is given to Response 3 and Response 5; give each response a different rank."),
    ]
    # Each rank field involved is marked, next to it.
    for pid in (p1, p2, p3, p4, p5):
        assert f'<p class="error-message" id="err-rank-{pid}">' in html


def _rank_selects(html: str) -> dict[str, str]:
    """Each rank select's selected option value ("" = "Choose a rank"), by select id."""
    out = {}
    for select_id, body in re.findall(r'<select id="(id-rank-\d+)"[^>]*>(.*?)</select>', html, re.S):
        chosen = re.findall(r'<option value="([^"]*)" selected>', body)
        assert len(chosen) == 1, body
        out[select_id] = chosen[0]
    return out


def test_without_javascript_the_ranking_starts_unranked(client, tide, steps):
    steps.start(client, tide, PID)
    response, spec = steps.page(client, tide)
    selects = _rank_selects(response.content.decode())
    assert selects == {f"id-rank-{pid}": "" for pid in spec.placements}


def test_a_page_without_ranks_is_refused_naming_every_response_after_the_ratings(client, tide, steps):
    steps.start(client, tide, PID)
    _, spec = steps.page(client, tide)
    data = {k: v for k, v in steps.answers(spec).items() if not k.startswith("rank-")}
    p2 = spec.placements[1]
    del data[f"rate-{p2}-empathy"]
    before = _state()
    response = client.post("/s/tide/page/", data)
    html = response.content.decode()
    assert response.status_code == 400
    assert _state() == before  # no rating, no rank, the visit not submitted
    summary = re.search(r'<div class="error-summary".*?</div>', html, re.S).group()
    items = re.findall(r'<li><a href="#([^"]+)">([^<]+)</a></li>', summary)
    # In page order: the rating in its response card first, then the ranking below the cards.
    assert items == [(f"id-rate-{p2}-empathy-1", "Please rate Response 2 for perceived empathy.")] + [
        (f"id-rank-{pid}", f"Please give Response {n} a rank.") for n, pid in enumerate(spec.placements, start=1)
    ]
    # Still unranked, each select marked and described by its message; the ratings given stay.
    assert _rank_selects(html) == {f"id-rank-{pid}": "" for pid in spec.placements}
    for pid in spec.placements:
        assert f'<p class="error-message" id="err-rank-{pid}">' in html
        assert re.search(rf'<select id="id-rank-{pid}"[^>]*aria-invalid="true"', html)
    p1 = spec.placements[0]
    assert f'id="id-rate-{p1}-empathy-4" name="rate-{p1}-empathy" value="4" checked' in html

    # Ranked in full (here the order shown, chosen explicitly), the page is saved.
    data.update({f"rank-{pid}": n for n, pid in enumerate(spec.placements, start=1)}, **{f"rate-{p2}-empathy": 2})
    assert client.post("/s/tide/page/", data).status_code == 303
    assert list(ItemPlacement.objects.filter(visit_id=spec.visit_id).order_by("position").values_list(
        "rank", flat=True)) == [1, 2, 3, 4, 5]


def test_it_rejects_a_tampered_service_call_too(tide, steps, client):
    participant = steps.start(client, tide, PID)
    _, spec = steps.page(client, tide)
    before = _state()
    with pytest.raises(services.AnswersRejected):
        services.block_answer_submit(
            participant_id=participant.pk, visit_id=spec.visit_id, answers=services.PageAnswers(by_type={"rating": {}})
        )
    assert _state() == before


def test_a_post_for_another_visit_changes_nothing(client, tide, steps):
    steps.start(client, tide, PID)
    _, spec = steps.page(client, tide)
    data = steps.answers(spec)
    later = BlockVisit.objects.filter(participant__external_id=PID).order_by("-sequence").first()
    other = Client()
    steps.start(other, tide, "b" * 24)
    foreign = BlockVisit.objects.filter(participant__external_id="b" * 24).first()
    before = _state()
    for visit_id in (later.pk, foreign.pk, "", "abc"):
        response = client.post("/s/tide/page/", {**data, "visit": visit_id})
        assert response.status_code == 409
        assert "This page is out of date" in response.content.decode()
    assert _state() == before


def test_a_double_submit_stores_one_set_of_answers(client, tide, steps):
    steps.start(client, tide, PID)
    _, spec = steps.page(client, tide)
    data = steps.answers(spec)
    assert client.post("/s/tide/page/", data).status_code == 303
    before = _state()
    again = client.post("/s/tide/page/", {**data, f"rate-{spec.placements[0]}-empathy": 1})
    assert again.status_code == 303 and again["Location"] == "/s/tide/page/"
    assert _state() == before
    assert Rating.objects.count() == 5


def test_a_post_after_completion_changes_nothing(client, tide, steps):
    steps.start(client, tide, PID)
    _, spec = steps.page(client, tide)
    data = steps.answers(spec)
    steps.finish(client, tide)
    before = _state()
    response = client.post("/s/tide/page/", data)
    assert response.status_code == 303 and response["Location"] == "/s/tide/done/"
    assert _state() == before


def test_it_records_attention_checks_passed_and_failed(client, tide, steps):
    participant = steps.start(client, tide, PID)
    results = []
    while True:
        _, spec = steps.page(client, tide)
        if spec.kind == "block":
            client.post("/s/tide/page/", steps.answers(spec))
        elif spec.kind == "check":
            expected = steps.answers(spec)["attention"]
            value = expected if not results else (expected % 5) + 1
            response = client.post("/s/tide/page/", {"visit": spec.visit_id, "attention": value})
            assert response.status_code == 303
            results.append(value == expected)
        else:
            break
    checks = list(participant.visits.filter(attention_check__isnull=False).order_by("sequence"))
    assert [v.attention_passed for v in checks] == [True, False]
    assert all(v.attention_value is not None for v in checks)


def test_an_attention_check_shows_the_statement_on_the_first_scale(client, tide, steps):
    participant = steps.start(client, tide, PID)
    check = participant.visits.filter(attention_check__isnull=False).order_by("sequence").first()
    while steps.page(client, tide)[1].visit_id != check.pk:
        steps.submit_current(client, tide)
    response, spec = steps.page(client, tide)
    html = response.content.decode()
    assert f"<legend>{check.attention_check.text}</legend>" in html
    assert spec.check_points == [1, 2, 3, 4, 5] and "2 (Slightly empathetic)" in html
    missing = client.post("/s/tide/page/", {"visit": spec.visit_id})
    assert missing.status_code == 400 and "Please choose an answer for this statement." in missing.content.decode()


def test_best_worst_must_differ_and_letters_follow_the_display_order(client, most_least, steps):
    steps.start(client, most_least, PID)
    response, spec = steps.page(client, most_least)
    html = response.content.decode()
    assert "best_worst" in spec.by_type and "<legend>Most empathetic response</legend>" in html
    # The letters go with the shown position (drawn at random per participant), never with a source.
    for number, letter in enumerate("ABCDE", start=1):
        assert f"Response {number} ({letter})</h2>" in html
    assert "text-why" not in html  # the study's one "why" question comes at the end
    data = steps.answers(spec)
    before = _state()
    same = client.post("/s/most-least/page/", {**data, "least": data["most"]})
    assert same.status_code == 400 and "must differ from the most" in same.content.decode()
    assert _state() == before
    ok = client.post("/s/most-least/page/", data)
    assert ok.status_code == 303
    visit = BlockVisit.objects.get(pk=spec.visit_id)
    choices = dict(visit.placements.values_list("pk", "choice"))
    assert choices[data["most"]] == "best" and choices[data["least"]] == "worst"


def test_a_three_dimension_study_asks_each_dimension_for_each_response(client, counselor, steps):
    steps.start(client, counselor, PID)
    response, spec = steps.page(client, counselor)
    assert set(spec.by_type.get("rating", {})) == {"resonance", "coherence", "advice"}
    assert "ranking" not in spec.by_type
    assert client.post("/s/counselor/page/", steps.answers(spec)).status_code == 303
    assert Rating.objects.count() == 3 * len(spec.placements)


def test_demographics_are_optional_and_saved_on_the_participant(client, tide, steps):
    steps.start(client, tide, PID)
    while steps.page(client, tide)[1].kind in {"block", "check"}:
        steps.submit_current(client, tide)
    html = client.get("/s/tide/about-you/").content.decode()
    assert "Prefer not to answer" in html and "Outside the US" in html and ">Ohio</option>" in html
    assert 'type="number" min="18" max="100" step="1"' in html  # age is asked in years (Table 3)
    for field, value, message in [("age", "200", "Please enter a number from 18 to 100."),
                                  ("age", "60-69", "Please enter a number from 18 to 100."),
                                  ("age", "33.5", "Please enter a whole number from 18 to 100."),
                                  ("state", "Atlantis", "Please choose one of the listed answers."),
                                  ("gender", "Robot", "Please choose one of the listed answers.")]:
        bad = client.post("/s/tide/about-you/", {field: value})
        assert bad.status_code == 400 and message in bad.content.decode(), (field, value)
        assert not Participant.objects.get().demographics_done
    response = client.post("/s/tide/about-you/", {"age": " 061 ", "gender": "Prefer not to answer", "state": "OH"})
    assert response.status_code == 303
    participant = Participant.objects.get()
    assert participant.demographics == {"age": "61", "gender": "Prefer not to answer", "state": "OH"}
    assert participant.demographics_done


def test_the_progress_bar_counts_blocks(client, tide, steps):
    participant = steps.start(client, tide, PID)
    first_check = participant.visits.filter(attention_check__isnull=False).order_by("sequence").first()
    for _ in range(first_check.sequence - 1):
        steps.submit_current(client, tide)
    blocks_done = first_check.sequence - 1
    html = steps.page(client, tide)[0].content.decode()
    assert f"Block {blocks_done} of 24 done" in html
    steps.submit_current(client, tide)
    html = steps.page(client, tide)[0].content.decode()
    assert f"Block {blocks_done + 1} of 24" in html and f'value="{blocks_done + 1}"' in html


# Session read, participant with study, visit list and draft (one query), the page (placements with their visit and
# items). The study's language, dimensions and questions are the process's copies (surveys.language,
# surveys.study_content); shown_at was stamped by the first GET. No session write: web/sessions.py saves an
# unchanged session only every SESSION_REFRESH_SECONDS. tests/test_capacity_queries.py pins the first GET too.
BLOCK_GET_QUERIES = 3
# The reads of the page, then the locked save (savepoint, last_seen_at (the lock), submitted_at of the current page
# only, ratings, ranks, the draft's deletion, release).
BLOCK_POST_QUERIES = 10


@pytest.mark.parametrize("answered", [0, 20])
def test_a_block_page_uses_a_fixed_number_of_queries(client, tide, steps, answered):
    steps.start(client, tide, PID)
    for _ in range(answered):
        steps.submit_current(client, tide)
    _, spec = steps.page(client, tide)
    while spec.kind != "block":
        steps.submit_current(client, tide)
        _, spec = steps.page(client, tide)
    with CaptureQueriesContext(connection) as get_queries:
        client.get("/s/tide/page/")
    assert len(get_queries) == BLOCK_GET_QUERIES, [q["sql"] for q in get_queries]
    with CaptureQueriesContext(connection) as post_queries:
        assert client.post("/s/tide/page/", steps.answers(spec)).status_code == 303
    assert len(post_queries) == BLOCK_POST_QUERIES, "\n".join(q["sql"][:90] for q in post_queries)


def test_response_orders_are_counterbalanced_over_participants(tide):
    rng = random.Random(5)
    for n in range(60):
        services.participant_enroll(study=tide, external_id=f"{n:024x}", seed=rng.getrandbits(62))
    counts = Counter(ItemPlacement.objects.values_list("item_id", "position"))
    # 60 participants, 5 positions: a Latin square gives each item each position 12 times.
    assert set(counts.values()) == {12}
    assert len(counts) == 120 * 5
    # Block orders differ between participants and checks are never first.
    orders = {tuple(p.visits.order_by("sequence").values_list("block_id", flat=True)) for p in Participant.objects.all()}
    assert len(orders) == 60
    assert not BlockVisit.objects.filter(sequence=1, block__isnull=True).exists()
