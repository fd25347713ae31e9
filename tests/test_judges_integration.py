"""Judges in the whole platform: imported and run judges (and the automatic metrics, as judges of kind metric)
reach the analysis run, its "Judges" section and figures, the exports, the zip and its codebook,
``manage.py export --what results``, the API and the dashboard."""

from __future__ import annotations

import csv
import io
import json
import re
import zipfile

import numpy as np
import pytest
from django.core.management import call_command
from django.test import override_settings
from django.utils import timezone

from analysis import frames
from analysis.models import MetricsRun, MetricsTable
from judges import services
from judges.importers import judgements_import
from judges.models import Judge, JudgeCall
from tests.support.fake_llm import KEY, FakeLLM
from tests.support.researcher import QUICK_ANALYSES, fill_with_bots, finished_run, narrow_analyses
from tests.support.shared import in_process_tasks

JUDGE_TABLES = ("judges", "judge_agreement", "judge_rater_loo", "judge_win_table")
REQUIRED = ["judge", "dimension", "level", "method", "estimate", "ci_low", "ci_high", "n"]


def _judge_csv(study, *, seed: int = 3) -> io.BytesIO:
    """A judge whose scores follow the people's mean per response (plus a little noise: the check below must hold
    whatever ids the rows got, which shift the bots' answers), rounded onto the 1-5 scale."""
    ratings = frames.ratings_frame(study.pk)
    means = ratings.groupby(["block_id", "response_id"], observed=True)["rating"].mean().dropna()
    rng = np.random.default_rng(seed)
    lines = ["judge,block_id,response_id,dimension,value,kind"]
    for (block, response), mean in means.items():
        value = int(np.clip(round(mean + rng.normal(0, 0.25)), 1, 5))
        lines.append(f"imported-judge,{block},{response},empathy,{value},other")
    data = io.BytesIO("\n".join(lines).encode())
    data.name = "judgements.csv"
    return data


def _metrics_run(study) -> None:
    """A finished metrics run's per-response scores, as the metrics stack stores them (analysis.automatic_metrics.metrics_run)."""
    responses = frames.responses_frame(study.pk)
    rng = np.random.default_rng(5)
    columns = ["response_id", "model", "condition", "scenario", "block_id", "rouge_l", "mean_rating", "n_ratings"]
    rows = [[r.response_id, r.model, r.condition, r.scenario, r.block_id, float(rng.random()), 3.0, 12]
            for r in responses.itertuples() if not r.is_reference]
    run = MetricsRun.objects.create(study=study, status="done", started_at=timezone.now(), finished_at=timezone.now())
    MetricsTable.objects.create(run=run, name="per_response", columns=columns, rows=rows)


@pytest.fixture(scope="module")
def _shared_rows_judged(_filled_for_module, django_db_blocker):
    """The module's filled TIDE (conftest: twelve bots) with an imported judge, a metrics run and a finished run of
    the judges' tables; built once for the three tests that read them, rolled back with the filled rows."""
    from surveys.models import Study

    with django_db_blocker.unblock(), pytest.MonkeyPatch.context() as patch, in_process_tasks(), \
            override_settings(ANALYSIS_BOOTSTRAP_SAMPLES=200):  # the figures are checked in test_judges_stats
        study = Study.objects.get(pk=_filled_for_module.study_pk)
        judgements_import(study=study, file=_judge_csv(study))
        _metrics_run(study)
        narrow_analyses(patch, (*QUICK_ANALYSES, *JUDGE_TABLES))
        run_pk = finished_run(study).pk
    yield run_pk


@pytest.fixture
def judged(_shared_rows_judged, filled):
    """The finished run of the judged study (``study``, with the module's twelve participants)."""
    from analysis.models import AnalysisRun

    return AnalysisRun.objects.get(pk=_shared_rows_judged)


def test_a_run_computes_the_judges_tables_with_the_metrics_as_judges(judged, owner_client, study):
    from analysis import selectors
    tables = {t.name: t for t in selectors.result_tables_of(run=judged)}
    assert set(JUDGE_TABLES) <= set(tables), judged.failures
    agreement = tables["judge_agreement"]
    assert set(REQUIRED) <= set(agreement.columns) and agreement.columns[0] == "judge"
    records = [dict(zip(agreement.columns, row)) for row in agreement.rows]
    kinds = {(r["judge"], r["kind"]) for r in records}
    assert ("imported-judge", "other") in kinds and ("rouge_l", "metric") in kinds
    methods = {r["method"] for r in records if r["judge"] == "imported-judge"}
    assert {"spearman", "kendall", "pearson", "same_winner", "alpha_people", "alpha_with_judge",
            "loo_spearman"} <= methods
    spearman = next(r for r in records if r["judge"] == "imported-judge" and r["method"] == "spearman")
    assert spearman["estimate"] > 0.5  # it follows the people's mean

    page = owner_client.get(f"/studies/{study.slug}/runs/{judged.pk}/").content.decode()
    assert '<h2 id="s-judges">Judges</h2>' in page
    assert 'data-table="judge_agreement"' in page and "judge_agreement" in page


def test_the_exports_zip_codebook_and_the_export_command_hold_both_files(judged, owner_client, study, tmp_path):
    call_command("export", "--study", study.slug, "--what", "results", "--out", str(tmp_path))
    with open(tmp_path / "judge_agreement.csv", encoding="utf-8") as handle:
        header = next(csv.reader(handle))
    assert set(REQUIRED) <= set(header) and header[0] == "judge"
    assert (tmp_path / "judges.csv").exists()
    archive = zipfile.ZipFile(io.BytesIO(b"".join(owner_client.get(
        f"/studies/{study.slug}/exports/everything.zip").streaming_content)))
    names = {name.rsplit("/", 1)[-1] for name in archive.namelist()}
    assert {"judges.csv", "judge_agreement.csv"} <= names
    codebook = next(n for n in archive.namelist() if n.endswith("codebook.csv"))
    rows = list(csv.reader(io.StringIO(archive.read(codebook).decode("utf-8-sig"))))
    described = {(row[0], row[1]) for row in rows}
    assert {("judge_agreement.csv", column) for column in REQUIRED} <= described
    assert all(row[2] and not row[2].startswith("not described") for row in rows if row[0].startswith("judge"))


def test_the_api_gives_the_judges_and_their_agreement(judged, owner_api, study):
    body = owner_api.get(f"/api/studies/{study.slug}/judges/").json()
    assert {j["judge"]: j["kind"] for j in body["judges"]} == {"imported-judge": "other"}
    agreement = owner_api.get(f"/api/studies/{study.slug}/judges/agreement/").json()
    assert agreement["run"] == judged.pk and set(REQUIRED) <= set(agreement["columns"])
    assert any(r["kind"] == "metric" for r in agreement["records"])


def test_the_api_import_reports_every_bad_line_and_writes_nothing(owner_api, study):
    upload = io.BytesIO(b"judge,block_id,response_id,dimension,value\nj,nope,x,empathy,9\n")
    upload.name = "judgements.csv"
    answer = owner_api.post(f"/api/studies/{study.slug}/imports/judgements/", {"judgements": upload},
                            format="multipart")
    assert answer.status_code == 400
    assert answer.json() == {"problems": ['judgements.csv:2:block_id: unknown block "nope"']}
    assert not Judge.objects.exists()


def test_the_import_page_takes_judgements(owner_client, study):
    upload = _judge_csv_rows(study)
    page = owner_client.post(f"/studies/{study.slug}/import/", {"kind": "judgements", "judgements": upload})
    assert page.status_code == 200 and "Imported judgements: 2 answers written" in page.content.decode()
    bad = io.BytesIO(b"judge,block_id,response_id,dimension,value\nBAD,x,y,z,1\n")
    bad.name = "judgements.csv"
    page = owner_client.post(f"/studies/{study.slug}/import/", {"kind": "judgements", "judgements": bad})
    assert page.status_code == 400 and "Nothing was imported: 2 problems" in page.content.decode()


def _judge_csv_rows(study) -> io.BytesIO:
    items = list(study.items.order_by("id")[:2].select_related("block"))
    data = io.BytesIO(("judge,block_id,response_id,dimension,value\n" + "".join(
        f"page-judge,{item.block.key},{item.key},empathy,3\n" for item in items)).encode())
    data.name = "judgements.csv"
    return data


def test_a_pairwise_judge_run_in_both_orders_reaches_kappa_and_position_bias(pairwise, owner, monkeypatch,
                                                                             owner_client):
    """An LLM judge that always answers "A" (the left response): the run asks every pair both ways, and the
    analysis finds it chose left every time and never the same response in both orders."""
    pairwise.owners.add(owner)
    fill_with_bots(pairwise, 10)
    fake = FakeLLM(lambda prompt: '{"preference": "A"}').start()
    try:
        from judges.client import JudgeClient
        judge = services.judge_register(study=pairwise, name="left-lover", kind="llm", model="m")
        run = services.judge_run_create(judge=judge, requests_per_minute=10_000, cost_cap=10)
        services.judge_run_execute(run_id=run.pk, client=JudgeClient(api_key=KEY, base_url=fake.url, model="m"))
    finally:
        fake.stop()
    assert JudgeCall.objects.filter(run=run).count() == 2 * pairwise.blocks.count()
    narrow_analyses(monkeypatch, JUDGE_TABLES)
    done = finished_run(pairwise)
    from analysis import selectors
    table = selectors.result_table(run=done, name="judge_agreement")
    records = {(r[0], r[3], r[4]): dict(zip(table.columns, r)) for r in table.rows}
    left = records[("left-lover", "position", "left_share")]
    assert left["estimate"] == 1.0 and left["n"] == 2 * pairwise.blocks.count()
    assert records[("left-lover", "position", "order_consistency")]["estimate"] == 0.0
    assert ("left-lover", "pair", "cohen_kappa") in records
    dashboard = owner_client.get(f"/studies/{pairwise.slug}/").content.decode()
    assert re.search(r"left-lover</strong>: done, 48 of 48 prompts,\s+0 unparsed; cost 0\.0000 of 10\.0000", dashboard)
