"""The New study page (issue 25, item 1): upload outputs + template, see the definition and its problems,
create the study as a draft. Researchers only; bad uploads are listed, never a 500."""

from __future__ import annotations

import json

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.urls import reverse

from surveys.models import Study
from tests.support.outputs_files import csv_bytes, outputs_rows, template_bytes

URL = reverse("researcher:new_study")


def upload(client, outputs: bytes, *, template: bytes | None = None, template_text: str = "",
           name: str = "outputs.csv", **fields):
    data = {"action": "check", "outputs": SimpleUploadedFile(name, outputs), "template_text": template_text, **fields}
    if template is not None:
        data["template"] = SimpleUploadedFile("template.json", template)
    return client.post(URL, data)


def test_anonymous_visitors_are_sent_to_sign_in(db, client):
    response = client.get(URL)
    assert response.status_code == 302 and "/accounts/login/" in response["Location"]
    assert client.post(URL, {"action": "create"}).status_code == 302
    assert not Study.objects.exists()


def test_the_page_offers_a_starter_template_that_builds(owner_client):
    page = owner_client.get(URL)
    assert page.status_code == 200
    starter = page.context["form"].initial["template_text"]
    response = upload(owner_client, csv_bytes(outputs_rows(3)), template_text=starter)
    assert response.status_code == 200, response.context["problems"]
    assert response.context["definition"]["slug"] == "my-study"


def test_check_shows_the_definition_then_create_makes_a_draft_the_researcher_owns(owner_client, owner):
    response = upload(owner_client, csv_bytes(outputs_rows(8)), template=template_bytes(), slug="from-page",
                      title="Built on the page")
    assert response.status_code == 200
    assert not Study.objects.exists()  # checking creates nothing
    body = response.content.decode()
    assert "8 prompts, 8 blocks, 32 responses" in body and "slug: from-page" in body
    created = owner_client.post(URL, {"action": "create"})
    study = Study.objects.get(slug="from-page")
    assert created.status_code == 302 and created["Location"] == reverse("researcher:dashboard", args=["from-page"])
    assert study.title == "Built on the page" and not study.is_open
    assert list(study.owners.all()) == [owner] and study.items.count() == 32
    # The checked definition is used once.
    assert owner_client.post(URL, {"action": "create"}).status_code == 400


def test_every_problem_is_listed_with_its_line_and_nothing_is_created(owner_client):
    rows = outputs_rows(3)
    rows.insert(5, dict(rows[4]))
    rows[1]["context"] = '{"role": "user"}'
    response = upload(owner_client, csv_bytes(rows, [*rows[0], "context"]), template=template_bytes())
    assert response.status_code == 400
    problems = response.context["problems"]
    assert any(p.startswith("outputs.csv:7:system: duplicate") for p in problems)
    assert any(p.startswith("outputs.csv:3:context: context: Input should be a valid list") for p in problems)
    assert "outputs.csv:7:system: duplicate" in response.content.decode()
    assert owner_client.post(URL, {"action": "create"}).status_code == 400
    assert not Study.objects.exists()


def test_create_refuses_a_slug_that_exists(owner_client, tide):
    upload(owner_client, csv_bytes(outputs_rows(3)), template=template_bytes(slug="tide"))
    response = owner_client.post(URL, {"action": "create"})
    assert response.status_code == 400
    assert 'slug: a study with the slug "tide" exists already' in response.context["problems"][0]
    assert tide.items.count() == 120


def test_a_missing_template_is_a_form_error_naming_the_field(owner_client):
    response = upload(owner_client, csv_bytes(outputs_rows(3)))
    assert response.status_code == 400
    assert response.context["form"].errors["template"] == ["Upload a template file or type the template below."]


@pytest.mark.parametrize("outputs, name, template, expected", [
    (b"", "outputs.csv", template_bytes(), "The submitted file is empty."),
    (b"prompt_id,prompt\n", "outputs.csv", template_bytes(), 'missing column "system"'),
    (b"\x00\x01\x02garbage", "outputs.parquet", template_bytes(), "not readable as Parquet"),
    (b"\xff\xfe\x00a", "outputs.csv", template_bytes(), "outputs.csv:1:1: the file is not UTF-8"),
    (b"{not json\n", "outputs.jsonl", template_bytes(), "outputs.jsonl:1:2: not valid JSON"),
    (b"[1, 2]\n", "outputs.jsonl", template_bytes(), "one JSON object"),
    (b"a,b\n1,2\n", "outputs.xlsx", template_bytes(), "unknown format .xlsx"),
    (csv_bytes(outputs_rows(2)), "outputs.csv", b"[1, 2]", "the template must hold one object"),
    (csv_bytes(outputs_rows(2)), "outputs.csv", b"{", "not valid JSON"),
    (csv_bytes(outputs_rows(2)), "outputs.csv", json.dumps({"slug": "x"}).encode(), "template.json: title: Field required"),
    (csv_bytes(outputs_rows(2)), "outputs.csv", template_bytes(sample={"prompts": 0, "seed": "x"}),
     "sample.prompts: Input should be greater than or equal to 1"),
    ('prompt_id,prompt,system,condition,response\n"unclosed,x,y,z,w\n'.encode(), "outputs.csv", template_bytes(),
     "outputs.csv:2:1: 1 cell(s) where the header has 5 columns"),
])
def test_bad_uploads_are_refused_with_a_message_never_a_500(owner_client, outputs, name, template, expected):
    response = upload(owner_client, outputs, template=template, name=name)
    assert response.status_code == 400
    body = response.content.decode()
    assert expected in body or expected.replace('"', "&quot;") in body
    assert not Study.objects.exists()
