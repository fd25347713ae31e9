"""Researcher pages: study list, live dashboard, analysis runs, results, exports, imports.

Every view resolves the study through ``surveys.permissions.require`` with the capability it needs
(404 outside the study's team, 403 for a role without it) and stays thin: reads come from selectors, writes from services (``runs`` for runs).
"""

from __future__ import annotations

import hashlib
import itertools
import json

from django.contrib.auth.decorators import login_required
from django.core.cache import cache
from django.db.models import Count, Q
from django.http import Http404, HttpRequest, HttpResponse, JsonResponse, StreamingHttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.template.loader import render_to_string
from django.views.decorators.http import require_POST

from surveys.monitoring import dashboard_snapshot
from surveys.permissions import Capability, can, require, studies_visible_to
from web.security import chart_page_csp
from web.signals import announce_action

from . import charts, registry, selectors
from .exporting import exports, slots
from .running import runs
from .automatic_metrics import metrics_run
from .imports import importers
from .forms import GoldImportForm, ResponsesImportForm
from .automatic_metrics.metrics import INSTALL_HINT, MetricsUnavailable
from .models import AnalysisRun, MetricsRun

FUNNEL_LABELS = [
    ("entered", "Entered"), ("consented", "Consented"), ("in_progress", "In progress"), ("idle", "Idle > 15 min"),
    ("holding", "Holding a place"), ("time_up", "In progress, time ran out"),
    ("completed", "Completed"), ("exited", "Exited early"), ("declined", "Declined consent"),
    ("turned_away", "Turned away (study full)"), ("target", "Target completions"), ("places_left", "Places left"),
]


@login_required
def study_list(request: HttpRequest) -> HttpResponse:
    studies = studies_visible_to(request.user).annotate(
        completed=Count("participants", filter=Q(participants__status="completed", participants__is_preview=False))
    ).order_by("slug")
    return render(request, "researcher/study_list.html", {"studies": studies})


def _run_context(study) -> dict:
    run = selectors.analysis_run_latest(study=study)
    flow = None
    if run is not None and run.status == AnalysisRun.Status.DONE:
        frame = selectors.result_table_frame(run=run, name="filter_flow")
        if frame is not None:
            flow = {"columns": list(frame.columns), "rows": frame.astype(object).where(frame.notna(), "").values.tolist()}
    # Older runs still queued or running (a newer one hides them otherwise), each with why it seems stuck.
    unfinished = [(older, runs.run_waiting_reason(older))
                  for older in selectors.analysis_runs_unfinished(study=study) if run is None or older.pk != run.pk]
    return {"study": study, "run": run, "flow": flow, "waiting": runs.run_waiting_reason(run) if run else "",
            "unfinished": unfinished}


@login_required
@chart_page_csp
def dashboard(request: HttpRequest, slug: str) -> HttpResponse:
    study = require(request.user, slug, Capability.VIEW, request=request)
    snapshot = dashboard_snapshot(study)
    funnel_rows = [(key, label, snapshot["funnel"][key]) for key, label in FUNNEL_LABELS]
    return render(request, "researcher/dashboard.html",
                  {**_run_context(study), "snapshot": snapshot, "funnel_rows": funnel_rows})


@login_required
def dashboard_data(request: HttpRequest, slug: str) -> JsonResponse:
    study = require(request.user, slug, Capability.VIEW, request=request)
    run_html = render_to_string("researcher/_run_status.html", _run_context(study), request=request)
    return JsonResponse({**dashboard_snapshot(study), "run_html": run_html})


@login_required
@require_POST
def run_start(request: HttpRequest, slug: str) -> HttpResponse:
    study = require(request.user, slug, Capability.RUN, request=request)
    run = runs.analysis_run_create(study=study, requested_by=request.user.get_username())
    announce_action(actor=request.user, study=study, action="run.start", object=f"run {run.pk}", request=request)
    # Straight to the run's own page, which shows its tables as they land (queued until a worker takes it).
    return redirect("researcher:results", slug=study.slug, run_id=run.pk)


@login_required
def run_status(request: HttpRequest, slug: str, run_id: int) -> JsonResponse:
    study = require(request.user, slug, Capability.VIEW, request=request)
    run = get_object_or_404(AnalysisRun, study=study, pk=run_id)
    return JsonResponse({"id": run.pk, "status": run.status, "step": run.step, "error": run.error,
                         "failures": run.failures, "pending": run.pending, "created_at": run.created_at,
                         "finished_at": run.finished_at})


LEVELS = ("participant", "rating")


#: A results page shows at most this many rows of a table (one row per rater runs to thousands); the CSV has all.
ROWS_SHOWN = 100


def _table_for_display(frame, *, level: str):
    if "level" in frame.columns and level in set(frame["level"]):
        frame = frame[frame["level"] == level]
    head = frame.head(ROWS_SHOWN)
    shown = head.round(4).astype(object).where(head.notna(), "")
    return {"columns": list(shown.columns), "rows": shown.values.tolist(), "n_rows": len(frame),
            "cut": len(frame) > ROWS_SHOWN}


@login_required
@chart_page_csp
def results(request: HttpRequest, slug: str, run_id: int) -> HttpResponse:
    """A run's tables and figures; while it is queued or runs, those landed so far and a list of those to come."""
    study = require(request.user, slug, Capability.VIEW, request=request)
    run = get_object_or_404(AnalysisRun, study=study, pk=run_id,
                            status__in=[AnalysisRun.Status.QUEUED, AnalysisRun.Status.RUNNING, AnalysisRun.Status.DONE])
    level = request.GET.get("level", "participant")
    if level not in LEVELS:
        level = "participant"
    frames = selectors.result_tables_so_far(run=run)
    sections = [
        {"key": key, "heading": heading, "tables": [
            {"name": a.name, "title": a.title, **_table_for_display(frames[a.name], level=level)} for a in analyses
        ]}
        for key, heading, analyses in registry.sections(frames)
    ]
    figures, template = _page_figures(study, run, frames)
    return render(request, "researcher/results.html", {
        "study": study, "run": run, "sections": sections, "level": level, "levels": LEVELS,
        "failures": sorted(run.failures.items()), "computing": _still_computing(run),
        "waiting": runs.run_waiting_reason(run),
        "figures": figures, "figure_template": template, **_metrics_context(study),
    })


# Seconds a done run's figures stay cached: building them with plotly.py takes most of the page's time.
FIGURES_CACHE_SECONDS = 3600


def _page_figures(study, run: AnalysisRun, frames) -> tuple[dict, dict | None]:
    """The results page's figures and their shared template; a done run's are built once and cached.

    A done run's tables never change; the key also holds what the figures
    take from the study (``selectors.figure_context``: its scale, labels, conditions...).
    """
    context = selectors.figure_context(study=study)

    def build() -> tuple[dict, dict | None]:
        return charts.page_payload(charts.results_figures(frames, registry.figure_sources(), **context))

    if run.status != AnalysisRun.Status.DONE:
        return build()
    study_part = hashlib.sha256(json.dumps(context, sort_keys=True, default=str).encode()).hexdigest()[:16]
    key = f"results-figures:{run.pk}:{run.attempts}:{study_part}"
    return cache.get_or_set(key, build, FIGURES_CACHE_SECONDS)


def _still_computing(run: AnalysisRun) -> list[str] | None:
    """Titles of the tables a running run has yet to land (None when the run is done)."""
    if run.status == AnalysisRun.Status.DONE:
        return None
    pending = set(run.pending)
    return [analysis.title for analysis in registry.REGISTERED if analysis.name in pending]


@login_required
def import_data(request: HttpRequest, slug: str) -> HttpResponse:
    """Upload responses collected elsewhere, or gold scores; all-or-nothing with every problem listed."""
    study = require(request.user, slug, Capability.MANAGE, request=request)
    responses_form, gold_form = ResponsesImportForm(), GoldImportForm()
    # Uploads other apps register (judges' answers: judges.importers, validated like the responses).
    registered_forms = {name: kind.form() for name, kind in importers.IMPORT_KINDS.items()}
    problems, report, status = [], None, 200
    if request.method == "POST":
        kind = request.POST.get("kind")
        if kind in importers.IMPORT_KINDS:
            registered = importers.IMPORT_KINDS[kind]
            registered_forms[kind] = registered.form(request.POST, request.FILES)
            form, run_import = registered_forms[kind], lambda f: registered.run(study, f)
        elif kind == "gold":
            gold_form = GoldImportForm(request.POST, request.FILES)
            form, run_import = gold_form, lambda f: importers.gold_import(study=study, gold_file=f["gold"])
        else:
            responses_form = ResponsesImportForm(request.POST, request.FILES)
            form, run_import = responses_form, lambda f: importers.responses_import(
                study=study, participants_file=f["participants"], ratings_file=f["ratings"])
        if form.is_valid():
            try:
                report = run_import(form.cleaned_data)
            except importers.ImportProblems as exc:
                problems, status = exc.problems, 400
        else:
            status = 400
    return render(request, "researcher/import.html", {
        "study": study, "responses_form": responses_form, "gold_form": gold_form, "problems": problems,
        "report": report, **{f"{name}_form": form for name, form in registered_forms.items()},
    }, status=status)


def _csv_response(request: HttpRequest, lines, filename: str) -> StreamingHttpResponse:
    """A streamed CSV download of rows of cells; ``?excel=1`` gives the variant with a UTF-8 byte order mark
    for Excel."""
    return _csv_batches_response(request, exports.row_batches(lines), filename)


def _csv_batches_response(request: HttpRequest, batches, filename: str) -> StreamingHttpResponse:
    """``_csv_response`` of rows given in batches (``exports.export_csv``)."""
    return _attachment(exports.csv_batch_bytes(batches, excel=request.GET.get("excel") == "1"),
                       "text/csv; charset=utf-8", filename)


def _attachment(content, content_type: str, filename: str) -> StreamingHttpResponse:
    response = StreamingHttpResponse(content, content_type=content_type)
    response["Content-Disposition"] = f'attachment; filename="{filename}"'
    return response


def _exports_busy(request: HttpRequest, study) -> HttpResponse:
    """Every export slot of the machine is taken (analysis.exporting.slots): try again in a few seconds."""
    response = render(request, "researcher/exports_busy.html",
                      {"study": study, "seconds": slots.RETRY_AFTER_SECONDS}, status=503)
    response["Retry-After"] = str(slots.RETRY_AFTER_SECONDS)
    return response


@login_required
def export_list(request: HttpRequest, slug: str) -> HttpResponse:
    study = require(request.user, slug, Capability.EXPORT, request=request)
    run = selectors.analysis_run_latest_done(study=study)
    files = [(name, exports.EXPORTS[name]) for name in exports.exports_of(run)] if run else []
    return render(request, "researcher/exports.html", {
        "study": study, "run": run, "files": files,
        "can_identifiers": can(request.user, study, Capability.IDENTIFIERS)})


@login_required
def export_download(request: HttpRequest, slug: str, name: str) -> HttpResponse:
    study = require(request.user, slug, Capability.IDENTIFIERS if name == "identifiers" else Capability.EXPORT,
                    request=request)
    if name not in exports.EXPORTS:
        raise Http404("No such export")
    if name == "identifiers" and request.GET.get("confirm") != "1":
        return redirect("researcher:exports", slug=study.slug)
    excel = request.GET.get("excel") == "1"
    try:
        run = exports.export_run(study=study)
        content = slots.streamed_in_slot(lambda: _export_bytes(run, name, excel=excel))
    except slots.ExportsBusy:
        return _exports_busy(request, study)
    except exports.ExportUnavailable as exc:
        return render(request, "researcher/export_unavailable.html", {"study": study, "reason": str(exc)}, status=404)
    _announce_download(request, study, exports.EXPORTS[name].filename, run=run)
    return _attachment(content, "text/csv; charset=utf-8", exports.EXPORTS[name].filename)


def _export_bytes(run, name: str, *, excel: bool):
    header, batches = exports.export_csv(run=run, what=name)
    return exports.csv_batch_bytes(itertools.chain([[header]], batches), excel=excel)


@login_required
def coverage_csv(request: HttpRequest, slug: str) -> HttpResponse:
    """coverage.csv as it stands now (no analysis run needed): the dashboard's link."""
    study = require(request.user, slug, Capability.EXPORT, request=request)
    _announce_download(request, study, "coverage.csv")
    return _csv_batches_response(request, exports.from_rows(lambda _: exports.coverage_rows(study))(None),
                                 "coverage.csv")


@login_required
def export_everything(request: HttpRequest, slug: str) -> HttpResponse:
    study = require(request.user, slug, Capability.EXPORT, request=request)
    try:
        run = exports.export_run(study=study)
        content = slots.streamed_in_slot(lambda: exports.everything_zip(run=run))
    except slots.ExportsBusy:
        return _exports_busy(request, study)
    except exports.ExportUnavailable as exc:
        return render(request, "researcher/export_unavailable.html", {"study": study, "reason": str(exc)}, status=404)
    announce_action(actor=request.user, study=study, action="export.zip", object=f"{study.slug}-run{run.pk}.zip",
                    detail="pseudonymous exports, no identifiers", request=request)
    return _attachment(content, "application/zip", f"{study.slug}-run{run.pk}-for-the-paper.zip")


@login_required
def table_csv(request: HttpRequest, slug: str, run_id: int, name: str) -> HttpResponse:
    study = require(request.user, slug, Capability.VIEW, request=request)
    run = get_object_or_404(AnalysisRun, study=study, pk=run_id, status=AnalysisRun.Status.DONE)
    frame = selectors.result_table_frame(run=run, name=name)
    if frame is None:
        raise Http404("No such table")
    _announce_download(request, study, f"{name}.csv", run=run)
    return _csv_response(request, _frame_lines(frame), f"{name}.csv")


@login_required
def figure_csv(request: HttpRequest, slug: str, run_id: int, key: str) -> HttpResponse:
    """The data behind one figure of the results page."""
    study = require(request.user, slug, Capability.VIEW, request=request)
    run = get_object_or_404(AnalysisRun, study=study, pk=run_id, status=AnalysisRun.Status.DONE)
    source = registry.figure_source(key)
    frame = selectors.result_table_frame(run=run, name=source.name) if source else None
    if frame is None:
        raise Http404("No such figure")
    if key.startswith("map_"):
        frame = frame[frame["scenario"] == key.removeprefix("map_")]
    _announce_download(request, study, f"{key}.csv", run=run)
    return _csv_response(request, _frame_lines(frame), f"{key}.csv")


def _announce_download(request: HttpRequest, study, filename: str, *, run: AnalysisRun | None = None,
                       detail: str = "") -> None:
    """Every download is in the audit trail; identifiers.csv under its own action name, flagged."""
    action = "export.identifiers" if filename == exports.EXPORTS["identifiers"].filename else "export.download"
    announce_action(actor=request.user, study=study, action=action, object=filename,
                    detail=detail or (f"run {run.pk}" if run else ""), request=request)


def _frame_lines(frame):
    yield list(frame.columns)
    for record in frame.itertuples(index=False):
        yield [exports.csv_cell(None if value != value else value) for value in record]


# --------------------------------------------------------------------------- automatic metrics (issue 9)

METRICS_SECTIONS = [
    ("metrics_table", "Automatic metrics per system and condition (mean, SD; Distinct-1/2)"),
    ("metric_agreement", "Agreement of each metric with people (Spearman, Kendall; bootstrap 95% CI)"),
    ("predictor_cv", "Rating predictor: held-out error, cross-validated by scenario"),
    ("robustness", "Robustness of the predictor to seven perturbations of the reference responses"),
]


def _metrics_context(study, *, prediction=None, predict_error: str = "", predict_text: str = "") -> dict:
    done = selectors.metrics_run_latest_done(study=study)
    tables = selectors.metrics_tables(run=done) if done else {}
    sections = [
        {"name": name, "title": title, "note": tables[name][1], **_table_for_display(tables[name][0], level="")}
        for name, title in METRICS_SECTIONS if name in tables
    ]
    return {
        "metrics_latest": selectors.metrics_run_latest(study=study),
        "metrics_done": done,
        "metrics_sections": sections,
        "metrics_figures": charts.metrics_figures({name: frame for name, (frame, _) in tables.items()}),
        "metrics_unavailable": metrics_run.unavailable_reason(),
        "metrics_install_hint": INSTALL_HINT,
        "has_predictor": selectors.metrics_run_latest_with_predictor(study=study) is not None,
        "prediction": prediction, "predict_error": predict_error, "predict_text": predict_text,
        "predict_max_chars": metrics_run.MAX_PREDICT_CHARS,
    }


@login_required
@chart_page_csp
def metrics_page(request: HttpRequest, slug: str) -> HttpResponse:
    study = require(request.user, slug, Capability.VIEW, request=request)
    return render(request, "researcher/metrics.html", {"study": study, **_metrics_context(study)})


@login_required
@require_POST
def metrics_start(request: HttpRequest, slug: str) -> HttpResponse:
    study = require(request.user, slug, Capability.RUN, request=request)
    metrics = metrics_run.metrics_run_create(study=study, requested_by=request.user.get_username())
    announce_action(actor=request.user, study=study, action="run.start", object=f"metrics run {metrics.pk}",
                    request=request)
    return redirect("researcher:metrics", slug=study.slug)


@login_required
@require_POST
@chart_page_csp
def metrics_predict(request: HttpRequest, slug: str) -> HttpResponse:
    """The score-a-text form: encodes one short text in this request (the predictor itself is precomputed)."""
    study = require(request.user, slug, Capability.RUN, request=request)
    text = request.POST.get("text", "").strip()
    prediction, error, status = None, "", 200
    if not text or len(text) > metrics_run.MAX_PREDICT_CHARS:
        error, status = f"Enter a text of 1 to {metrics_run.MAX_PREDICT_CHARS} characters.", 400
    else:
        try:
            frame, _ = metrics_run.study_predict(study=study, texts=[text])
            prediction = frame.iloc[0].to_dict()
        except metrics_run.PredictorNotTrained as exc:
            error, status = str(exc), 409
        except MetricsUnavailable as exc:
            error, status = str(exc), 503
    context = _metrics_context(study, prediction=prediction, predict_error=error, predict_text=text)
    return render(request, "researcher/metrics.html", {"study": study, **context}, status=status)


@login_required
def metrics_table_csv(request: HttpRequest, slug: str, run_id: int, name: str) -> HttpResponse:
    study = require(request.user, slug, Capability.VIEW, request=request)
    run = get_object_or_404(MetricsRun, study=study, pk=run_id, status=MetricsRun.Status.DONE)
    tables = selectors.metrics_tables(run=run)
    if name not in tables:
        raise Http404("No such table")
    _announce_download(request, study, f"metrics_{name}.csv", detail=f"metrics run {run.pk}")
    return _csv_response(request, _frame_lines(tables[name][0]), f"metrics_{name}.csv")
