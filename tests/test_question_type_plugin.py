"""A question type added at test time, the way docs/study-definition.md says to add one (issue 28): one unit
(``Slider`` below: its definition field, form field, rules, controls, check, save and answer file with its
codebook), one partial (written into a template folder of the test), one registration, and its bot. Nothing
else in the code names it, yet it goes through the definition (its field is participant-facing by derivation),
the page, the HTTP bots and the services' bots, the save (``TypedAnswer`` rows), the export (slider.csv from the
command and in the zip) and the codebook; and a registered type's answers are refused on a page of a study that
does not ask it."""

from __future__ import annotations

import csv
import io
import re
import zipfile
from collections import Counter

import pytest
from django import forms
from django.core.management import call_command
from django.test import override_settings

from bots import question_bots
from bots.drive import run_in_process, run_with_services
from bots.personas import persona_named
from surveys import definition as definition_module
from surveys import questions, services
from surveys.definition import parse_definition, read_definition_file
from surveys.definition_parts import NonEmpty, Strict, facing
from surveys.loader import StudyLocked, study_load
from surveys.models import ItemPlacement, TypedAnswer
from surveys.questions import AnswerFile, QuestionType
from surveys.forms import PageForm
from surveys.questions.controls import Control, entered_value, field_error
from surveys.selectors import visit_page_get
from tests.support.downloads import response_bytes
from tests.support.paths import FIXTURES
from tests.support.researcher import finished_run
from tests.support.survey_steps import SurveySteps

FIELD_PATTERN = re.compile(r"^slide-(\d+)$")
SLIDER_FILE = "slider.csv"
SLIDER_COLUMNS = ["participant_id", "block_id", "response_id", "value"]
PARTIAL = (
    '{% for control in part.controls %}<div class="slider"><label for="{{ control.input_id }}">{{ control.label }}'
    '</label> <input type="range" id="{{ control.input_id }}" name="{{ control.name }}" min="{{ control.minimum }}"'
    ' max="{{ control.maximum }}" step="1" value="{{ control.value|default:50 }}">'
    '{% if control.error %}<p id="{{ control.error_id }}">{{ control.error }}</p>{% endif %}</div>{% endfor %}'
)


def field_name(placement_id: int) -> str:
    return f"slide-{placement_id}"


class SliderDef(Strict):
    prompt: NonEmpty


class Slider(QuestionType):
    """How far would you trust each response, 0-100: one value per response, stored as TypedAnswer rows."""

    key = "slider"
    template = "slider_question.html"
    exports = ("slider",)
    answer_files = (AnswerFile("slider", SLIDER_FILE, "0-100 trust of each response, retained participants"),)
    export_columns = {SLIDER_FILE: SLIDER_COLUMNS}
    codebook = {SLIDER_FILE: {
        "response_id": ("the response the value is given to", "text", "the study's response ids"),
        "value": ("how far the participant would trust the response", "integer", "0-100"),
    }}
    definition_fields = {"slider": (SliderDef | None, facing(None))}

    def declared(self, definition) -> bool:
        return definition.slider is not None

    def in_study(self, study) -> bool:
        return bool(study.definition.get("slider"))

    def asked(self, page) -> bool:
        return self.in_study(page.study) and not page.is_check

    def add_fields(self, form) -> None:
        for placement in form.page.placements:
            form.fields[field_name(placement.pk)] = forms.IntegerField(min_value=0, max_value=100)

    def foreign(self, form, name: str) -> bool:
        match = FIELD_PATTERN.match(name)
        return bool(match) and (not self.asked(form.page) or int(match.group(1)) not in form.numbers)

    def collect(self, form, cleaned, answers) -> None:
        answers.by_type[self.key] = {p.pk: cleaned[field_name(p.pk)] for p in form.page.placements}

    def controls(self, form) -> list[Control]:
        prompt = form.page.study.definition["slider"]["prompt"]
        return [Control(name=field_name(p.pk), label=f"{prompt} ({p.position})", minimum=0, maximum=100,
                        value=entered_value(form, field_name(p.pk)), error=field_error(form, field_name(p.pk)))
                for p in form.page.placements]

    def answered(self, answers) -> bool:
        return bool(self.answer(answers, {}))

    def check(self, page, answers) -> str | None:
        values = self.answer(answers, {})
        if set(values) != {p.pk for p in page.placements}:
            return "every response of the page needs one slider value"
        if not all(isinstance(v, int) and 0 <= v <= 100 for v in values.values()):
            return "a slider value lies outside 0-100"
        return None

    def save(self, page, participant, answers) -> None:
        self.typed_answers_save(page, participant, self.answer(answers))

    def answer_file_rows(self, name, *, study_id, participant_ids):
        answers = list(self.typed_answers(participant_ids))
        responses = dict(ItemPlacement.objects.filter(pk__in=[int(a.item) for a in answers])
                         .values_list("pk", "item__key"))
        for answer in answers:
            yield [answer.participant.pseudonym, answer.visit.block.key, responses[int(answer.item)], answer.value]


class SliderBot(question_bots.TypeBot):
    key = "slider"

    def read_spec(self, spec, *, radios, selects, inputs) -> None:
        if ranges := {name: (int(attrs["min"]), int(attrs["max"])) for name, attrs in inputs.items()
                      if attrs.get("type") == "range" and FIELD_PATTERN.match(name)}:
            spec.by_type[self.key] = ranges

    def read_page(self, spec, *, page, study) -> None:
        if Slider().asked(page):
            spec.by_type[self.key] = {field_name(p.pk): (0, 100) for p in page.placements}

    def fields(self, persona, spec, quality, score, rng) -> dict[str, str]:
        # The persona's liking of the response (its mean rating, 1-5) on the slider's range.
        return {name: str(round(low + (high - low) * (score[int(FIELD_PATTERN.match(name).group(1))] - 1) / 4))
                for name, (low, high) in spec.by_type[self.key].items()}


@pytest.fixture
def slider_registered(tmp_path, settings):
    """The type, its bot and its partial, registered for one test and taken away after it."""
    (tmp_path / Slider.template).write_text(PARTIAL)
    settings.TEMPLATES = [{**settings.TEMPLATES[0], "DIRS": [*settings.TEMPLATES[0]["DIRS"], tmp_path]}]
    questions.question_type_register(Slider())
    question_bots.question_bot_register(SliderBot())
    try:
        yield
    finally:
        questions.question_type_remove(Slider.key)
        question_bots.BOTS.pop(SliderBot.key, None)


def _slider_definition(slug: str = "slider-tide") -> dict:
    """TIDE with two of its blocks per participant and the slider asked under each response."""
    definition = read_definition_file(FIXTURES / "tide.json")
    definition.update(slug=slug, slider={"prompt": "How far would you trust it?"},
                      allocation={"blocks_per_participant": 2, "judgements_per_block": 1})
    definition["recruitment"] = {k: v for k, v in definition["recruitment"].items() if k != "target_completions"}
    definition["quality"]["duration_min_minutes"] = 1  # two blocks take a few minutes, not TIDE's ten
    return definition


def test_the_types_field_joins_the_definition_and_its_participant_facing_list_by_derivation(slider_registered, db):
    assert "slider" in definition_module.PARTICIPANT_FACING
    assert definition_module.StudyDefinition.model_fields["slider"].default is None
    study = study_load(definition=parse_definition(_slider_definition())).study
    assert questions.declared_types(parse_definition(_slider_definition()))[-1] == "slider"
    run_with_services(persona=persona_named("honest"), study=study, seed=3)
    # Participants exist: the slider's prompt is what they answered, so a reload that changes it is refused.
    changed = _slider_definition()
    changed["slider"]["prompt"] = "How far would you believe it?"
    with pytest.raises(StudyLocked, match="slider"):
        study_load(definition=parse_definition(changed))
    # A definition that misspells the type's own field is refused with its path, as any other field.
    misspelled = {**_slider_definition(), "slider": {"promt": "x"}}
    with pytest.raises(definition_module.DefinitionError, match="slider"):
        parse_definition(misspelled)


def test_without_the_type_its_field_is_unknown_and_nothing_else_knows_it(db):
    assert "slider" not in definition_module.PARTICIPANT_FACING
    assert "slider" not in definition_module.StudyDefinition.model_fields
    with pytest.raises(definition_module.DefinitionError, match="slider"):
        parse_definition(_slider_definition())


def test_the_page_shows_the_slider_and_the_http_bots_answer_it(slider_registered, client, db):
    study = study_load(definition=parse_definition(_slider_definition())).study
    steps = SurveySteps()
    steps.start(client, study, "c" * 24)
    response, spec = steps.page(client, study)
    html = response.content.decode()
    assert spec.kind == "block" and len(spec.placements) == 5
    assert spec.by_type["slider"] == {field_name(pid): (0, 100) for pid in spec.placements}
    assert html.count('type="range"') == 5 and "How far would you trust it? (1)" in html
    # An answer off the slider's range is refused with the rule's message; nothing is saved.
    answers = steps.answers(spec) | {field_name(pid): "50" for pid in spec.placements}
    refused = client.post(f"/s/{study.slug}/page/", {**answers, field_name(spec.placements[0]): "101"})
    html = refused.content.decode()
    assert refused.status_code == 400 and "less than or equal to 100" in html and 'value="101"' in html
    assert not TypedAnswer.objects.exists()
    # A slider value for a response that is not on the page is tampering.
    tampered = client.post(f"/s/{study.slug}/page/", {**answers, "slide-999999": "5"})
    assert tampered.status_code == 400 and not TypedAnswer.objects.exists()
    # Without a slider value the page is incomplete.
    missing = client.post(f"/s/{study.slug}/page/", {**answers, field_name(spec.placements[0]): ""})
    assert missing.status_code == 400 and not TypedAnswer.objects.exists()

    runs = [run_in_process(persona=persona_named("honest"), study=study, seed=seed) for seed in range(3)]
    assert all(run.outcome == "completed" for run in runs)
    posted = {(s.visit_id, int(FIELD_PATTERN.match(name).group(1))): int(value)
              for run in runs for s in run.submitted if s.kind == "block"
              for name, value in s.fields.items() if FIELD_PATTERN.match(name)}
    stored = {(a.visit_id, int(a.item)): a.value for a in TypedAnswer.objects.filter(type_key="slider")}
    assert stored == posted and len(stored) == 3 * 2 * 5  # three bots, two blocks, five responses each
    # Each value follows the persona's own ratings of the response (its mean rating on 0-100).
    for (visit_id, placement_id), value in stored.items():
        ratings = [r.value for r in ItemPlacement.objects.get(pk=placement_id).ratings.all()]
        assert abs(value - (sum(ratings) / len(ratings) - 1) * 25) <= 1


def test_a_page_of_a_study_without_the_slider_refuses_slider_answers(slider_registered, client, db):
    study = study_load(definition=parse_definition({**_slider_definition("no-slider"), "slider": None})).study
    run = run_with_services(persona=persona_named("honest"), study=study, seed=1)
    assert run.outcome == "completed"
    assert not any(FIELD_PATTERN.match(name) for s in run.submitted for name in s.fields)
    steps = SurveySteps()
    participant = steps.start(client, study, "d" * 24)
    response, spec = steps.page(client, study)
    assert "slider" not in spec.by_type and 'type="range"' not in response.content.decode()
    valid = steps.answers(spec)
    # Through the page: a slider field is tampering; the same answers without it are saved.
    posted = client.post(f"/s/{study.slug}/page/", {**valid, field_name(spec.placements[0]): "50"})
    assert posted.status_code == 400 and not TypedAnswer.objects.exists()
    assert not participant.visits.filter(submitted_at__isnull=False).exists()
    # Through the services: the type's answers on a page that does not ask it are refused.
    form = PageForm(valid, page=visit_page_get(visit_id=spec.visit_id, study=study))
    assert form.is_valid(), form.errors
    answers = form.page_answers()
    answers.by_type["slider"] = {spec.placements[0]: 5}
    with pytest.raises(services.AnswersRejected, match="slider"):
        services.block_answer_submit(participant_id=participant.pk, visit_id=spec.visit_id, answers=answers)
    assert not participant.visits.filter(submitted_at__isnull=False).exists()
    del answers.by_type["slider"]
    assert services.block_answer_submit(participant_id=participant.pk, visit_id=spec.visit_id, answers=answers) == "saved"
    assert not TypedAnswer.objects.exists()


def test_the_answers_go_to_slider_csv_in_the_zip_with_their_codebook_and_from_the_command(
        slider_registered, db, owner, client, tmp_path, quick_stats):
    study = study_load(definition=parse_definition(_slider_definition())).study
    study.owners.add(owner)
    for seed in range(4):
        run_with_services(persona=persona_named("honest"), study=study, seed=seed)
    run = finished_run(study)
    expected = [[a.participant.pseudonym, a.visit.block.key, ItemPlacement.objects.get(pk=int(a.item)).item.key,
                 str(a.value)]
                for a in TypedAnswer.objects.filter(participant__results__run=run, participant__results__excluded_by="")
                .order_by("participant_id", "visit__sequence", "item")]
    assert len(expected) >= 2 * 2 * 5

    client.force_login(owner)
    archive = zipfile.ZipFile(io.BytesIO(response_bytes(client.get(f"/studies/{study.slug}/exports/everything.zip"))))
    read = {name: list(csv.reader(io.StringIO(archive.read(name).decode()))) for name in archive.namelist()
            if name.endswith(".csv")}
    assert read[SLIDER_FILE] == [SLIDER_COLUMNS, *expected]
    codebook = {(row[0], row[1]): row[2:] for row in read["codebook.csv"][1:]}
    assert codebook[(SLIDER_FILE, "value")] == ["how far the participant would trust the response", "integer", "0-100"]
    assert all((SLIDER_FILE, column) in codebook for column in SLIDER_COLUMNS)
    assert SLIDER_FILE in archive.read("README.txt").decode()

    call_command("export", "--study", study.slug, "--what", "slider", "--out", str(tmp_path))
    with (tmp_path / SLIDER_FILE).open(newline="", encoding="utf-8") as handle:
        assert list(csv.reader(handle)) == [SLIDER_COLUMNS, *expected]
    # The values are the bots' answers, one per response shown: counted independently from the placements.
    shown = Counter(ItemPlacement.objects.filter(visit__participant__study=study, visit__submitted_at__isnull=False)
                    .values_list("visit__participant_id", flat=True))
    assert sum(shown.values()) == TypedAnswer.objects.filter(type_key="slider").count()
