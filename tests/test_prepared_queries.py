"""A prepared query (web.prepared_queries) returns what its queryset returns, and a prepared update writes
what ``update()`` writes, for each set of values; a queryset whose values do not reach the SQL as plain
parameters is refused. Run on SQLite and on PostgreSQL.

The participant flow and the block page's placements, which use it, are compared here with the ORM's own
reading of the same rows: every field, the objects brought along by ``select_related`` and the annotations.
"""

from datetime import datetime, timedelta, timezone

import pytest
from django.db import connection
from django.db.models import Case, Count, IntegerField, Value, When
from django.db.models.functions import Coalesce
from django.test.utils import CaptureQueriesContext

from surveys import selectors
from surveys.models import BlockVisit, ItemPlacement, Participant
from web.prepared_queries import PreparationError, PreparedQuery, PreparedUpdate


def _fields(instance) -> dict:
    return {f.attname: getattr(instance, f.attname) for f in instance._meta.concrete_fields}


def _participants_with_visits():
    return PreparedQuery(
        lambda study_id, status: Participant.objects.select_related("study")
        .filter(study_id=study_id, status=status)
        .annotate(visit_count=Count("visits"))
        .order_by("pk"),
        study_id=int,
        status=str,
    )


def test_rows_fields_related_objects_and_annotations_are_the_orms(filled):
    prepared = _participants_with_visits()
    expected = list(
        Participant.objects.select_related("study").filter(study_id=filled.pk, status="completed")
        .annotate(visit_count=Count("visits")).order_by("pk")
    )
    got = prepared.run(study_id=filled.pk, status="completed")
    assert len(expected) >= 2
    assert [_fields(p) for p in got] == [_fields(p) for p in expected]
    assert [_fields(p.study) for p in got] == [_fields(p.study) for p in expected]
    assert [p.visit_count for p in got] == [p.visit_count for p in expected] and all(p.visit_count > 0 for p in got)
    # The related object is attached: reading it costs no query.
    with CaptureQueriesContext(connection) as captured:
        assert {p.study.slug for p in got} == {filled.slug}
    assert len(captured) == 0


def test_each_run_uses_its_own_values_and_an_empty_result_is_empty(filled):
    prepared = _participants_with_visits()
    completed = prepared.run(study_id=filled.pk, status="completed")
    assert prepared.run(study_id=filled.pk, status="no such status") == []
    assert prepared.run(study_id=filled.pk + 10_000, status="completed") == []
    assert [p.pk for p in prepared.run(study_id=filled.pk, status="completed")] == [p.pk for p in completed]


@pytest.mark.django_db
def test_the_sql_is_compiled_once_per_process():
    built = []

    def build(visit_id):
        built.append(visit_id)
        return ItemPlacement.objects.filter(visit_id=visit_id)

    prepared = PreparedQuery(build, visit_id=int)
    for visit_id in (1, 2, 3):
        assert prepared.run(visit_id=visit_id) == []
    assert len(built) <= 2  # the model's lookup and the compilation, each with stand-in values
    assert all(value < -10**18 for value in built)


@pytest.mark.django_db
def test_a_value_the_orm_transforms_is_refused():
    prepared = PreparedQuery(lambda text: Participant.objects.filter(external_id__icontains=text), text=str)
    with pytest.raises(PreparationError, match="do not reach the SQL"):
        prepared.run(text="abc")


@pytest.mark.django_db
def test_values_must_be_the_ones_declared():
    prepared = PreparedQuery(lambda visit_id: ItemPlacement.objects.filter(visit_id=visit_id), visit_id=int)
    with pytest.raises(TypeError, match="visit_id"):
        prepared.run(visit=1)
    with pytest.raises(PreparationError, match="unsupported"):
        PreparedQuery(lambda when: ItemPlacement.objects.all(), when=float)


def test_participant_flow_and_block_page_read_what_the_orm_reads(filled):
    for participant in Participant.objects.filter(study=filled).order_by("pk")[:6]:
        state = selectors.participant_flow_get(participant_id=participant.pk, slug=filled.slug)
        assert _fields(state.participant) == _fields(Participant.objects.get(pk=participant.pk))
        assert _fields(state.participant.study) == _fields(filled)
        visits = list(BlockVisit.objects.filter(participant=participant).order_by("sequence"))
        assert [v.id for v in state.visits] == [v.pk for v in visits]
        assert [v.submitted for v in state.visits] == [v.submitted_at is not None for v in visits]
        for visit in visits:
            if visit.attention_check_id is not None:
                continue
            page = selectors.visit_page_get(visit_id=visit.pk, study=filled, is_block=True)
            expected = list(ItemPlacement.objects.filter(visit=visit).select_related("item").order_by("position"))
            assert [_fields(p) for p in page.placements] == [_fields(p) for p in expected]
            assert [_fields(p.item) for p in page.placements] == [_fields(p.item) for p in expected]
            assert _fields(page.visit) == _fields(visit)
            assert _fields(page.visit.block.scenario) == _fields(visit.block.scenario)
    assert selectors.participant_flow_get(participant_id=participant.pk, slug="not-" + filled.slug) is None


def _seen_update():
    return PreparedUpdate(
        lambda participant_id, status, now: (
            Participant.objects.filter(pk=participant_id, status=status),
            {"last_seen_at": now, "started_at": Coalesce("started_at", Value(now))},
        ),
        participant_id=int, status=str, now=datetime,
    )


def test_an_update_writes_what_the_orm_writes_and_counts_the_rows(filled):
    first, second = Participant.objects.filter(study=filled, status="completed").order_by("pk")[:2]
    now = datetime(2026, 11, 29, 16, 40, 12, 345678, tzinfo=timezone.utc)
    prepared = _seen_update()
    assert prepared.run(participant_id=first.pk, status="completed", now=now) == 1
    Participant.objects.filter(pk=second.pk, status="completed").update(
        last_seen_at=now, started_at=Coalesce("started_at", Value(now)))
    assert Participant.objects.get(pk=first.pk).last_seen_at == now == Participant.objects.get(pk=second.pk).last_seen_at
    assert Participant.objects.get(pk=first.pk).started_at == first.started_at  # Coalesce kept the value there
    assert prepared.run(participant_id=first.pk, status="in_progress", now=now) == 0
    assert prepared.run(participant_id=second.pk, status="completed", now=now + timedelta(seconds=1)) == 1
    assert Participant.objects.get(pk=second.pk).last_seen_at == now + timedelta(seconds=1)
    assert Participant.objects.get(pk=first.pk).last_seen_at == now


def _server_prepared() -> list[str]:
    with connection.cursor() as cursor:
        cursor.execute("SELECT statement FROM pg_prepared_statements")
        return [row[0] for row in cursor.fetchall()]


@pytest.mark.skipif(connection.vendor != "postgresql", reason="statements are prepared on PostgreSQL's server")
@pytest.mark.parametrize("threshold", [0, None])
def test_on_postgresql_the_statement_is_prepared_on_the_server_once(filled, threshold):
    """With the connection's prepare_threshold (config.settings sets 0) a prepared query's statement is
    prepared by PostgreSQL on its first run and reused after; without one (DATABASE_PREPARED_STATEMENTS off)
    nothing is prepared. The rows are the ORM's either way, and Django counts the query as before."""
    connection.ensure_connection()
    kept = connection.connection.prepare_threshold
    connection.connection.prepare_threshold = threshold
    try:
        participant = Participant.objects.filter(study=filled).order_by("pk").first()
        expected = selectors._participant_flow_queryset(participant_id=participant.pk, slug=filled.slug).get()
        before = _server_prepared()
        with CaptureQueriesContext(connection) as captured:
            runs = [selectors._participant_flow.run(participant_id=participant.pk, slug=filled.slug) for _ in range(3)]
        after = _server_prepared()
    finally:
        connection.connection.prepare_threshold = kept
    assert len(captured) == 3
    for found in runs:
        assert [_fields(p) for p in found] == [_fields(expected)] and found[0].visit_rows == expected.visit_rows
    new = [statement for statement in after if statement not in before]
    if threshold is None:
        assert new == []
    else:
        assert len(new) == 1 and '"surveys_participant"' in new[0] and "$1" in new[0]


def test_a_list_value_is_compiled_once_per_length(filled):
    placements = list(ItemPlacement.objects.filter(visit__participant__study=filled).order_by("pk")[:5])
    prepared = PreparedUpdate(
        lambda ids, ranks: (
            ItemPlacement.objects.filter(pk__in=ids),
            {"rank": Case(*(When(pk=i, then=Value(r)) for i, r in zip(ids, ranks)), output_field=IntegerField())},
        ),
        ids=list, ranks=list,
    )
    before = [p.pk for p in placements]
    assert prepared.run(ids=before[:2], ranks=[101, 102]) == 2
    assert prepared.run(ids=before[2:5], ranks=[103, 104, 105]) == 3
    after = dict(ItemPlacement.objects.filter(pk__in=before).values_list("pk", "rank"))
    assert after == {p.pk: 101 + n for n, p in enumerate(placements)}
    assert len(prepared._compiled) == 2


@pytest.mark.django_db
def test_an_ordered_or_sliced_update_is_refused():
    prepared = PreparedUpdate(lambda pk: (Participant.objects.filter(pk=pk).order_by("pk"), {"external_id": "x"}),
                              pk=int)
    with pytest.raises(PreparationError, match="ordered"):
        prepared.run(pk=1)
