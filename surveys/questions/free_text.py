"""Free text on a block: the study's per-block written questions (a reason, a comment), optional or required.

The study-level ones are asked with the demographic questions at the end
(``surveys.forms.DemographicsForm``); both are exported in free_text.csv.
"""

from __future__ import annotations

import re
from typing import Any

from django import forms
from django.db import models
from django.db.models import F, Q, QuerySet
from pydantic import Field

from .. import limits
from ..core_models import BlockVisit, Participant, Study
from ..definition_parts import Key, NonEmpty, Strict, facing
from .base import AnswerFile, QuestionType
from .controls import Control, entered_value, field_error, free_text_messages

FIELD_PATTERN = re.compile(r"^text-(.+)$")

FREE_TEXT_FILE = "free_text.csv"
FREE_TEXT_COLUMNS = ["participant_id", "question_key", "block_id", "scenario", "text"]
_CODEBOOK = {
    "question_key": ("key of the study's free-text question answered", "text", "the study's free-text question keys"),
    "block_id": ("block the answer was written under (for a question asked on every block)", "text",
                 "the study's block ids; blank for a question asked once for the whole study"),
    "scenario": ("scenario of the block the answer was written under", "text",
                 "the study's scenario ids; blank for a question asked once for the whole study"),
    "text": ("the participant's answer as written (a cell starting with = + - @ or a tab is prefixed with a "
             "single quote)", "text", "free text up to the question's maximum length; unanswered questions have "
             "no row"),
}


class FreeTextQuestion(models.Model):
    """One of the study's written questions, asked on every block (``per_block``) or once at the end."""

    study = models.ForeignKey(Study, on_delete=models.CASCADE, related_name="free_text_questions")
    key = models.CharField(max_length=limits.KEY)
    prompt = models.TextField()
    max_length = models.PositiveIntegerField(default=1000)
    required = models.BooleanField(default=False)
    # Asked under every block (e.g. "why did you choose these?") or once at the end.
    per_block = models.BooleanField(default=False)
    order = models.PositiveSmallIntegerField(default=0)

    class Meta:
        ordering = ["order", "id"]
        constraints = [
            models.UniqueConstraint(fields=["study", "key"], name="free_text_unique_key"),
            models.CheckConstraint(
                condition=Q(max_length__gte=1) & Q(max_length__lte=10000), name="free_text_max_length_range"
            ),
        ]


class FreeTextAnswer(models.Model):
    """A participant's written answer to one question: on one block page (``visit``), or once (no visit)."""

    participant = models.ForeignKey(Participant, on_delete=models.CASCADE, related_name="free_text_answers")
    question = models.ForeignKey(FreeTextQuestion, on_delete=models.PROTECT, related_name="answers")
    visit = models.ForeignKey(
        BlockVisit, on_delete=models.CASCADE, null=True, blank=True, related_name="free_text_answers"
    )
    text = models.TextField()

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["participant", "question"], condition=Q(visit__isnull=True), name="free_text_answer_once"
            ),
            models.UniqueConstraint(
                fields=["participant", "question", "visit"],
                condition=Q(visit__isnull=False),
                name="free_text_answer_once_per_visit",
            ),
        ]


class FreeTextDef(Strict):
    key: Key
    prompt: NonEmpty
    max_length: int = Field(default=1000, ge=1, le=10000)
    required: bool = False
    per_block: bool = False


def field_name(key: str) -> str:
    return f"text-{key}"


class FreeTextType(QuestionType):
    key = "free_text"
    judges_responses = False  # a comment or a reason beside the judgements
    template = "surveys/questions/free_text.html"
    exports = ("free-text",)
    answer_files = (AnswerFile("free-text", FREE_TEXT_FILE, "written answers of retained participants"),)
    definition_fields = {"free_text": (list[FreeTextDef], facing(default_factory=list))}
    export_columns = {FREE_TEXT_FILE: FREE_TEXT_COLUMNS}
    codebook = {FREE_TEXT_FILE: _CODEBOOK}

    def declared(self, definition) -> bool:
        return any(q.per_block for q in definition.free_text)

    def in_study(self, study) -> bool:
        # Also the study-level questions of the last page: their answers share the storage and the export.
        return FreeTextQuestion.objects.filter(study=study).exists()

    def asked(self, page) -> bool:
        return bool(page.free_text_questions) and not page.is_check

    def add_fields(self, form) -> None:
        for question in form.page.free_text_questions:
            form.fields[field_name(question.key)] = forms.CharField(
                max_length=question.max_length, required=question.required, error_messages=free_text_messages(),
            )

    def collect(self, form, cleaned: dict[str, Any], answers) -> None:
        answers.by_type[self.key] = {q.pk: cleaned.get(field_name(q.key), "") for q in form.page.free_text_questions}

    def controls(self, form) -> list[Control]:
        return [
            Control(name=field_name(q.key), label=q.prompt, value=entered_value(form, field_name(q.key)),
                    error=field_error(form, field_name(q.key)), max_length=q.max_length, required=q.required)
            for q in form.page.free_text_questions
        ]

    def answered(self, answers) -> bool:
        return any(self.answer(answers, {}).values())

    def check(self, page, answers) -> str | None:
        questions = {q.pk: q for q in page.free_text_questions}
        texts = self.answer(answers, {})
        for qid, text in texts.items():
            if qid not in questions or len(text) > questions[qid].max_length:
                return "a written answer does not fit its question"
        if blank := [q.key for q in page.free_text_questions if q.required and not texts.get(q.pk, "").strip()]:
            return f"required questions not answered: {', '.join(blank)}"
        return None

    def save(self, page, participant, answers) -> None:
        FreeTextAnswer.objects.bulk_create(
            FreeTextAnswer(participant=participant, question_id=qid, visit=page.visit, text=text)
            for qid, text in self.answer(answers, {}).items()
            if text
        )

    def answer_file_rows(self, name: str, *, study_id: int, participant_ids: QuerySet) -> QuerySet:
        """free_text.csv: per participant (enrolment order), the per-block answers in the order the blocks were
        shown, then the study-level ones, whose block and scenario are blank."""
        return (
            FreeTextAnswer.objects.filter(participant_id__in=participant_ids)
            .order_by("participant_id", F("visit__sequence").asc(nulls_last=True), "question__order", "question_id")
            .values_list("participant__pseudonym", "question__key", "visit__block__key",
                         "visit__block__scenario__key", "text")
        )
