"""What every question type provides: one class per type, registered in ``surveys.questions``.

A type carries, in one place, everything about one kind of question a block
asks: the checks across the definition, the page form's fields and their
rules, the controls the template renders, the service's last check and the
save, and the answer files it brings with their codebook entries
(``analysis.exporting.exports`` and ``analysis.exporting.codebook`` write and
describe every file the types declare, and name none of them). The form, the
service and the bots loop over the registered types and know none of them;
how a bot reads and answers a type is ``bots.question_bots``'s (surveys never
imports bots).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from django.db import models
from django.db.models import QuerySet

from ..core_models import BlockVisit, Dimension, ItemPlacement, Participant, Study, TypedAnswer

if TYPE_CHECKING:
    from ..page_answers import PageAnswers
    from .controls import Control


# The definition, the form and the service loop over the types, so the types know them only by what they
# use of them (a protocol each), never by an import: the question package sits below all three.


class StudyDefinition(Protocol):
    """What a type reads of a study definition (``surveys.definition.StudyDefinition``): its blocks,
    dimensions and labels, and the fields the types own (``definition_fields``), read by name."""

    blocks: list[Any]
    dimensions: list[Any]
    letter_labels: bool

    def __getattr__(self, name: str) -> Any: ...


class VisitPage(Protocol):
    """What a type reads of a block or attention-check page (``surveys.selectors.VisitPage``)."""

    visit: BlockVisit
    placements: list[ItemPlacement]
    dimensions: list[Dimension]
    study: Study
    free_text_questions: list[Any]

    @property
    def is_check(self) -> bool: ...


class PageForm(Protocol):
    """What a type uses of the page's form (``surveys.forms.PageForm``, a Django form)."""

    page: VisitPage
    construct: str
    letter_labels: bool
    numbers: dict[int, int]
    fields: dict[str, Any]
    data: Any
    initial: dict[str, Any]
    errors: Any
    is_bound: bool

    def add_error(self, field: str | None, error: Any) -> None: ...

    @property
    def cards(self) -> list[Any]: ...


@dataclass(frozen=True)
class AnswerFile:
    """An answer file that a type writes itself, under an export name of its ``exports``; its columns are its
    ``answer_file_columns`` (``export_columns[filename]`` unless the study adds some), their meanings its
    ``codebook``.

    Its rows come from ``QuestionType.answer_file_rows``, or, for a file that must hold the analyses' own
    derived values (block_order, seconds_on_block ...), from one of the analyses' frames: ``frame`` names it
    (an ``analysis.frames.ANSWER_FRAMES`` key; a name, not an import, because surveys sits below analysis).
    Such a file is written a column at a time from frames of a few hundred participants each, never row by
    row (ratings.csv holds a million rows).
    """

    name: str
    filename: str
    description: str
    frame: str = ""
    #: The frame's float columns (NaN for none) that hold whole numbers, written as integers.
    whole_numbers: frozenset[str] = frozenset()
    #: Listed for every study, not only those that ask the type (ratings.csv: a study without a rating scale
    #: still has a row per response shown, its rating blank).
    every_study: bool = False


@dataclass(frozen=True)
class AnswerColumns:
    """Columns in which a type keeps its answers on rows that every block page writes anyway (an
    ``ItemPlacement`` per response shown, the page's ``BlockVisit``), with their constraints: ranking's rank
    and best-worst's choice per response, pairwise's preference per page.

    ``surveys.models`` puts them on the model while the app loads (``answer_storage_install``), so the model,
    its migrations and every query see them as the model's own. A type with answers of another shape
    declares a model in its own module instead (rating's ``Rating``), or stores ``TypedAnswer`` rows.
    """

    model: type[models.Model]
    fields: dict[str, models.Field]
    constraints: tuple[models.BaseConstraint, ...] = ()

    def install(self) -> None:
        for name, field in self.fields.items():
            # A model lists its fields in their creation order: numbered now, the columns follow the model's
            # own in the types' registration order, as the tables have them, whatever module was read first.
            field.creation_counter = models.Field.creation_counter
            models.Field.creation_counter += 1
            self.model.add_to_class(name, field)
        # In place: the model's options keep this same list as the Meta's original (what migrations read).
        self.model._meta.constraints.extend(self.constraints)


@dataclass(frozen=True)
class Part:
    """A type's questions below the response cards: the partial that renders them and their controls."""

    template: str
    controls: list["Control"]
    form: "PageForm"

    @property
    def per_response(self) -> list[tuple[Any, "Control"]]:
        """(card, control) pairs, for a type with one control per response (ranking)."""
        return list(zip(self.form.cards, self.controls))


class QuestionType:
    """One kind of question; the defaults fit a type that the page does not ask."""

    key: str = ""
    #: The partial that renders this type's controls below the response cards ("" when there are none).
    template: str = ""
    #: Answer exports (``analysis.exporting.exports.EXPORTS`` names) that a study asking this type gets.
    exports: tuple[str, ...] = ()
    #: Its answers judge the responses shown (a study asks at least one such type); free text only comments.
    judges_responses: bool = True
    #: Its page shows the responses next to each other, where the screen is wide enough (pairwise).
    side_by_side: bool = False
    #: Where the type keeps its answers, when on rows the page writes anyway (columns added to their models); a
    #: type with a model of its own declares it in its module, one without either stores ``TypedAnswer`` rows.
    answer_columns: tuple[AnswerColumns, ...] = ()
    #: The answer files among them that the type writes (free_text.csv, choices.csv, ratings.csv ...).
    answer_files: tuple[AnswerFile, ...] = ()
    #: The answer files this type brings: file name -> its columns, in order.
    export_columns: dict[str, list[str]] = {}
    #: Their codebook entries (``analysis.exporting.codebook``): file name -> column -> (meaning, type, allowed
    #: values), for the columns the file gives a meaning of its own; the shared ones (participant_id, model ...)
    #: are the codebook's. A type may describe its own columns of another type's file (ranking: rank_changed
    #: in ratings.csv).
    codebook: dict[str, dict[str, tuple[str, str, str]]] = {}

    #: The fields of the study definition this type owns: name -> (type, ``definition_parts.facing(default)``
    #: or ``not_facing(default)``, as participants see it or not); they complete
    #: ``surveys.definition.StudyDefinition``. Texts are ``definition_parts.Text`` (refuses a NUL).
    definition_fields: dict[str, tuple[Any, Any]] = {}

    # --- the study definition ---------------------------------------------------------
    def declared(self, definition: "StudyDefinition") -> bool:
        """The definition asks this type (every block shows it)."""
        return False

    def definition_problems(self, definition: "StudyDefinition") -> list[str]:
        """Checks across the definition's parts for this type, with their paths; [] when it fits."""
        return []

    def in_study(self, study: "Study") -> bool:
        """A stored study asks this type (its answer exports are listed for it)."""
        return False

    # --- the page -------------------------------------------------------------------
    def asked(self, page: "VisitPage") -> bool:
        """This block page asks the type's questions."""
        return False

    def add_fields(self, form: "PageForm") -> None:
        """The form fields of the type's questions (only called when ``asked``)."""

    def foreign(self, form: "PageForm", name: str) -> bool:
        """``name`` was posted as one of this type's fields but does not belong to this page."""
        return False

    def clean(self, form: "PageForm", cleaned: dict[str, Any]) -> None:
        """Rules across the type's fields; errors go to ``form.add_error``."""

    def collect(self, form: "PageForm", cleaned: dict[str, Any], answers: "PageAnswers") -> None:
        """Copy the cleaned answers into ``answers`` for the service."""

    def card_controls(self, form: "PageForm", placement: Any) -> list["Control"]:
        """Controls shown inside one response's card."""
        return []

    def controls(self, form: "PageForm") -> list["Control"]:
        """Controls below the cards, in page order: the partial renders them, the error summary lists them."""
        return []

    # --- the service ----------------------------------------------------------------
    def answer(self, answers: "PageAnswers", empty: Any = None) -> Any:
        """This type's validated answer in ``answers`` (``empty`` when the page carries none)."""
        return answers.by_type.get(self.key, empty)

    def answered(self, answers: "PageAnswers") -> bool:
        """``answers`` carries answers of this type (a page that does not ask it must carry none)."""
        return False

    def check(self, page: "VisitPage", answers: "PageAnswers") -> str | None:
        """Why the answers do not fit this page (the last line of defence behind the form), or None."""
        return None

    def save(self, page: "VisitPage", participant: Participant, answers: "PageAnswers") -> None:
        """Write the type's answers (inside the submit's transaction, after ``check`` passed)."""

    # --- storage for a type without a model of its own ------------------------------------
    def typed_answers_save(self, page: "VisitPage", participant: Participant, values: Mapping[str, Any]) -> None:
        """Store the page's answers of this type as ``TypedAnswer`` rows: item (a placement's id, say, or ""
        for one answer per page) -> a JSON value."""
        TypedAnswer.objects.bulk_create(
            TypedAnswer(participant=participant, visit=page.visit, type_key=self.key, item=str(item), value=value)
            for item, value in values.items()
        )

    def typed_answers(self, participant_ids: Iterable[int] | QuerySet) -> QuerySet[TypedAnswer]:
        """The stored ``TypedAnswer`` rows of this type for these participants (ids or a subquery of them),
        in the participants' page order, with the participant, block and scenario read along."""
        return (
            TypedAnswer.objects.filter(type_key=self.key, participant_id__in=participant_ids)
            .select_related("participant", "visit__block__scenario")
            .order_by("participant_id", "visit__sequence", "item")
        )

    # --- exports ----------------------------------------------------------------------
    def answer_file_columns(self, name: str, *, study: "Study") -> list[str]:
        """The header of the answer file ``name`` (one of ``answer_files``) for this study."""
        (filename,) = (answer_file.filename for answer_file in self.answer_files if answer_file.name == name)
        return self.export_columns[filename]

    def answer_file_rows(self, name: str, *, study_id: int, participant_ids: QuerySet) -> Iterable[Any]:
        """The rows (header excluded, each a sequence of values in ``export_columns`` order) of the answer file
        ``name`` (one of ``answer_files``, without a ``frame``) for the run's retained participants (a subquery
        of their ids): a queryset of tuples is streamed in chunks."""
        return []
