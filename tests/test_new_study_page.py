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
                      title="Built on the page", construct="clear", language="zh-hans")
    assert response.status_code == 200
    assert not Study.objects.exists()  # checking creates nothing
    body = response.content.decode()
    assert "8 prompts, 8 blocks, 32 responses" in body and "slug: from-page" in body
    created = owner_client.post(URL, {"action": "create"})
    study = Study.objects.get(slug="from-page")
    assert created.status_code == 302 and created["Location"] == reverse("researcher:dashboard", args=["from-page"])
    assert (study.title, study.construct, study.language) == ("Built on the page", "clear", "zh-hans")
    assert not study.is_open
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
    (csv_bytes(outputs_rows(2)), "outputs.csv", json.dumps({"slug": "x"}).encode(),
     "template.json: title: Field required"),
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


# --- whatever is uploaded, the answer is a list of problems or a definition ---------------------------

from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from surveys.outputs import OutputsProblems, definition_from_outputs  # noqa: E402

HEADER = "prompt_id,prompt,system,condition,response,context,block,reference\n"
ROWS = ["a,P1,x,y,z", "P1,hi,s1,c,r,,,\n", "P1,hi,s2,c,r,,,\n", '"[{""role"":""user"",""text"":""x""}]"']
csv_like = st.lists(st.sampled_from(list('ab,"\n\r []{}:P1\x00é\\') + ['"role"', '"user"', '"text"', *ROWS]),
                    max_size=80).map("".join)
template_like = st.one_of(
    st.just(template_bytes()),
    st.dictionaries(st.sampled_from(["slug", "recruitment", "reference_conditions", "sample", "allocation",
                                     "systems", "ranking"]),
                    st.one_of(st.none(), st.integers(-2, 3), st.text(max_size=5), st.lists(st.text(max_size=3)),
                              st.just({"prompts": 1, "seed": 1}), st.just({"blocks_per_participant": 2,
                                                                          "judgements_per_block": 9})),
                    max_size=4).map(lambda extra: template_bytes(**extra)),
)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(body=st.one_of(csv_like.map(lambda text: (HEADER + text).encode("utf-8", "surrogatepass")),
                      st.binary(max_size=200)),
       suffix=st.sampled_from([".csv", ".jsonl", ".parquet"]), template=template_like)
def test_any_upload_gives_a_definition_or_its_problems(body, suffix, template):
    try:
        definition = definition_from_outputs(f"outputs{suffix}", body, "template.json", template)
    except OutputsProblems as exc:
        assert exc.problems and all(isinstance(p, str) and p for p in exc.problems)
    else:
        assert definition["blocks"] and definition["scenarios"]
