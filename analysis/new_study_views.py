"""The New study page: model outputs and a template become a study definition, shown with its problems,
then a study closed to participants (a draft) owned by the researcher (surveys.outputs, surveys.study_creation)."""

from __future__ import annotations

import json
from pathlib import Path

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render

from surveys.definition import DefinitionError, parse_definition
from surveys.outputs import OutputsProblems, definition_from_outputs, definition_text
from surveys.study_creation import StudyExists, study_create_draft

from .forms import NewStudyForm

STARTER_TEMPLATE = (Path(__file__).resolve().parent.parent / "surveys" / "starter_template.yaml").read_text("utf-8")
# The checked definition waits in the researcher's session (server-side) between "Check" and "Create".
SESSION_KEY = "new_study_definition"
SHOWN_LINES = 400


@login_required
def new_study(request: HttpRequest) -> HttpResponse:
    form = NewStudyForm(initial={"template_text": STARTER_TEMPLATE})
    problems: list[str] = []
    definition = None
    status = 200
    if request.method == "POST" and request.POST.get("action") == "create":
        stored = request.session.get(SESSION_KEY)
        if stored is None:
            problems, status = ["Nothing to create yet: upload the outputs and check them first."], 400
        else:
            try:
                study = study_create_draft(definition=parse_definition(json.loads(stored)), owner=request.user)
            except DefinitionError as exc:
                problems, status = exc.problems, 400
            except StudyExists as exc:
                problems, status, definition = [f"slug: {exc}"], 400, json.loads(stored)
            else:
                del request.session[SESSION_KEY]
                return redirect("researcher:dashboard", study.slug)
    elif request.method == "POST":
        form = NewStudyForm(request.POST, request.FILES)
        if form.is_valid():
            upload = form.cleaned_data["outputs"]
            template_name, template_data = form.template_source()
            try:
                definition = definition_from_outputs(upload.name, upload.read(), template_name, template_data,
                                                     overrides=form.overrides())
            except OutputsProblems as exc:
                problems, status = exc.problems, 400
            else:
                request.session[SESSION_KEY] = json.dumps(definition, ensure_ascii=False)
        else:
            status = 400
    return render(request, "researcher/new_study.html", {
        "form": form, "problems": problems, **_shown(definition),
    }, status=status)


def _shown(definition: dict | None) -> dict:
    if definition is None:
        return {"definition": None}
    lines = definition_text(definition, as_yaml=True).splitlines()
    return {
        "definition": definition,
        "definition_text": "\n".join(lines[:SHOWN_LINES]),
        "lines_left": max(0, len(lines) - SHOWN_LINES),
        "responses": sum(len(block["responses"]) for block in definition["blocks"]),
    }
