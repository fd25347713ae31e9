"""A prepared query (surveys.prepared_queries) returns what its queryset returns, for each set of values, and
refuses a queryset whose values do not reach the SQL as plain parameters. Run on SQLite and on PostgreSQL.

The participant flow and the block page's placements, which use it, are compared here with the ORM's own
reading of the same rows: every field, the objects brought along by ``select_related`` and the annotations.
"""

import pytest
from django.db import connection
from django.db.models import Count
from django.test.utils import CaptureQueriesContext

from surveys import selectors
from surveys.models import BlockVisit, ItemPlacement, Participant
from surveys.prepared_queries import PreparationError, PreparedQuery


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
