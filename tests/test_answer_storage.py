"""Where answers are stored is each question type's own (issue 28): the built-in types declare it in their units,
as a model of their own (rating, free text) or as columns on the rows every block page writes (ranking's rank,
best-worst's choice, pairwise's preference: ``AnswerColumns``), and ``surveys.models`` only gathers them. The
migrations describe exactly what the units declare."""

from __future__ import annotations

import inspect

import pytest
from django.apps import apps
from django.core.management import call_command

from surveys import core_models, questions
from surveys.models import BlockVisit, ItemPlacement
from surveys.questions import AnswerColumns, QuestionType

# The modules a model of the surveys app may be declared in: the platform's own, or a question type's unit.
UNIT_MODULES = {type(kind).__module__ for kind in questions.QUESTION_TYPES}


def declared_columns() -> list[tuple[type, str, object]]:
    return [(columns.model, name, field) for kind in questions.QUESTION_TYPES
            for columns in kind.answer_columns for name, field in columns.fields.items()]


def test_every_model_of_the_app_is_the_platforms_own_or_declared_by_a_question_type():
    modules = {model.__name__: model.__module__ for model in apps.get_app_config("surveys").get_models()}
    assert set(modules.values()) <= {core_models.__name__, *UNIT_MODULES}
    # The types' own models are among them, and each is importable from surveys.models as before.
    declared_by_units = {name for name, module in modules.items() if module in UNIT_MODULES}
    assert declared_by_units, "no question type declares a model of its own"
    import surveys.models

    assert all(getattr(surveys.models, name) is apps.get_model("surveys", name) for name in modules)


def test_the_answer_columns_on_the_core_models_are_the_units_fields_and_nothing_else_declares_them():
    columns = declared_columns()
    assert columns, "no question type keeps answers in columns"
    for model, name, field in columns:
        assert model._meta.get_field(name) is field
        # Not written in the core model's own class: only the unit declares it.
        assert f"\n    {name} = " not in inspect.getsource(model)
    for kind in questions.QUESTION_TYPES:
        for declared in kind.answer_columns:
            assert all(constraint in declared.model._meta.constraints for constraint in declared.constraints)


@pytest.mark.django_db
def test_the_migrations_hold_exactly_what_the_models_and_the_units_declare():
    """makemigrations --check exits non-zero when a model (a unit's column or model included) differs from the
    migrations."""
    call_command("makemigrations", "--check", "--dry-run", verbosity=0)


@pytest.mark.parametrize("model", [ItemPlacement, BlockVisit])
def test_the_units_columns_follow_the_models_own_fields_in_registration_order(model):
    """As the migrations made the tables (code that writes whole rows reads the fields in order), whatever
    module Python read first."""
    own = [field.name for field in model._meta.concrete_fields if f"\n    {field.name} = " in inspect.getsource(model)
           or field.primary_key]
    added = [name for column_model, name, _ in declared_columns() if column_model is model]
    assert added
    assert [field.name for field in model._meta.concrete_fields] == own + added


def test_a_type_registered_after_start_up_cannot_add_columns_and_nothing_changes():
    class Late(QuestionType):
        key = "late_columns"
        answer_columns = (AnswerColumns(ItemPlacement, {}),)

    before = list(questions.QUESTION_TYPES)
    with pytest.raises(ValueError, match="TypedAnswer rows or in a model of its own"):
        questions.question_type_register(Late())
    assert questions.QUESTION_TYPES == before
