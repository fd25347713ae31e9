"""Participant pages in the study's language: the definition's "language", the shipped
catalogues, the pages of a Chinese study (validation messages and dates included),
stored answers that stay in English, and right-to-left languages."""

from __future__ import annotations

import re

import polib
import pytest
from django.core.management import call_command
from django.test import override_settings

from surveys.definition import DefinitionError, PREFER_NOT, parse_definition, read_definition_file
from surveys.loader import study_load
from surveys.models import BlockVisit, Participant
from tests.support.paths import ROOT
from tests.support.studies import load_fixture
from tests.support.survey_steps import SurveySteps

PO = ROOT / "locale" / "zh_Hans" / "LC_MESSAGES" / "django.po"


@pytest.fixture
def counselor_zh(db):
    return load_fixture("counselor_zh.json")


def _link(study) -> str:
    """A new invited rater's personal link: the counselor studies recruit invited raters."""
    return SurveySteps().link(study)


def _html(response) -> str:
    return response.content.decode()


def _answer_current_page(client, study) -> str:
    """Submit the current block or check page with valid answers; returns the page's kind."""
    from bots.pages import page_spec_from_html

    spec = page_spec_from_html(_html(client.get(f"/s/{study.slug}/page/", follow=True)))
    if spec.kind == "check":
        # The statement is in Chinese: its expected answer comes from the study, not from the text.
        expected = BlockVisit.objects.get(pk=spec.visit_id).attention_check.expected_value
        client.post(f"/s/{study.slug}/page/", {"visit": spec.visit_id, "attention": expected})
    elif spec.kind == "block":
        data = {"visit": spec.visit_id}
        data.update({f"rate-{pid}-{key}": 4 for pid in spec.placements for key in spec.by_type.get("rating", {})})
        client.post(f"/s/{study.slug}/page/", data)
    return spec.kind


# --- the catalogues ---------------------------------------------------------------------------


def test_every_text_of_the_chinese_catalogue_is_translated():
    catalogue = polib.pofile(str(PO))
    assert len(catalogue) > 100
    untranslated = [entry.msgid for entry in catalogue if not entry.translated()]
    assert untranslated == []
    assert catalogue.fuzzy_entries() == [] and catalogue.obsolete_entries() == []
    # Placeholders survive translation: a missing %(number)s would raise at render time.
    for entry in catalogue:
        names = set(re.findall(r"%\((\w+)\)", entry.msgid))
        translations = entry.msgstr_plural.values() if entry.msgid_plural else [entry.msgstr]
        for text in translations:
            assert set(re.findall(r"%\((\w+)\)", text)) == names, entry.msgid
            assert re.search(r"[\u4e00-\u9fff]", text) or entry.msgid == ", ", entry.msgid


_GETTEXT_CALLS = {"_", "gettext", "gettext_lazy", "ngettext", "ngettext_lazy"}
_BLOCK = re.compile(r"{%\s*blocktranslate\b([^%]*)%}(.*?){%\s*endblocktranslate\s*%}", re.S)
_TRANSLATE = re.compile(r"""{%\s*translate\s+(["'])(.*?)\1""", re.S)


def _block_msgids(options: str, body: str) -> list[str]:
    """The msgids of one {% blocktranslate %}: ``{{ name }}`` as ``%(name)s``, "trimmed" joining the stripped
    lines with a space, a {% plural %} part as the plural's id."""
    ids = []
    for part in re.split(r"{%\s*plural\s*%}", body):
        text = re.sub(r"{{\s*(\w+)\s*}}", r"%(\1)s", part.replace("%", "%%").replace("%%(", "%("))
        if "trimmed" in options:
            text = " ".join(line.strip() for line in text.strip().splitlines() if line.strip())
        ids.append(text)
    return ids


def source_msgids() -> set[str]:
    """Every text the participant pages translate: gettext calls in the Python of surveys/ and web/ (their
    first string argument) and the {% translate %} and {% blocktranslate %} texts of the templates."""
    import ast

    ids: set[str] = set()
    for path in [*(ROOT / "surveys").rglob("*.py"), *(ROOT / "web").rglob("*.py")]:
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            name = getattr(getattr(node, "func", None), "id", None) or getattr(getattr(node, "func", None), "attr", None)
            if isinstance(node, ast.Call) and name in _GETTEXT_CALLS and node.args:
                ids.update(arg.value for arg in node.args[:2 if name.startswith("ngettext") else 1]
                           if isinstance(arg, ast.Constant) and isinstance(arg.value, str))
    for path in (ROOT / "templates").rglob("*.html"):
        text = path.read_text(encoding="utf-8")
        ids.update(match.group(2) for match in _TRANSLATE.finditer(text))
        for match in _BLOCK.finditer(text):
            ids.update(_block_msgids(match.group(1), match.group(2)))
    return ids


def test_every_text_the_pages_translate_is_in_the_chinese_catalogue():
    """A new text (a question type's label, a template's sentence) that the catalogue lacks fails here,
    not on a Chinese participant's page."""
    ids = source_msgids()
    assert len(ids) > 100 and "Both are bad" in ids
    catalogue = {entry.msgid for entry in polib.pofile(str(PO))} | {
        entry.msgid_plural for entry in polib.pofile(str(PO)) if entry.msgid_plural}
    assert sorted(ids - catalogue) == []


def test_the_compiled_catalogue_is_up_to_date():
    """locale/*/django.mo is what ``manage.py compile_translations`` makes of its .po."""
    compiled = {(e.msgid, e.msgid_plural): (e.msgstr, e.msgstr_plural) for e in polib.mofile(str(PO.with_suffix(".mo")))}
    source = {(e.msgid, e.msgid_plural): (e.msgstr, e.msgstr_plural) for e in polib.pofile(str(PO)) if e.msgid}
    compiled.pop(("", ""), None)  # the header
    assert compiled == source


def test_compile_translations_rebuilds_the_catalogue(tmp_path, settings):
    locale = tmp_path / "zh_Hans" / "LC_MESSAGES"
    locale.mkdir(parents=True)
    (locale / "django.po").write_bytes(PO.read_bytes())
    settings.LOCALE_PATHS = [tmp_path]
    call_command("compile_translations")
    assert (locale / "django.mo").read_bytes() == PO.with_suffix(".mo").read_bytes()


def test_compile_translations_refuses_an_untranslated_text(tmp_path, settings):
    locale = tmp_path / "zh_Hans" / "LC_MESSAGES"
    locale.mkdir(parents=True)
    catalogue = polib.pofile(str(PO))
    catalogue[0].msgstr = ""
    catalogue.save(str(locale / "django.po"))
    settings.LOCALE_PATHS = [tmp_path]
    from django.core.management.base import CommandError

    with pytest.raises(CommandError, match="1 texts are not translated"):
        call_command("compile_translations")
    assert not (locale / "django.mo").exists()


# --- the definition ---------------------------------------------------------------------------


def test_a_study_speaks_english_unless_its_definition_says_otherwise(counselor):
    assert counselor.language == "en"


def test_a_study_stores_its_language(counselor_zh):
    assert counselor_zh.language == "zh-hans"


def test_an_unknown_language_is_refused_with_the_known_ones():
    definition = read_definition_file(ROOT / "fixtures" / "counselor_zh.json")
    definition["language"] = "klingon"
    with pytest.raises(DefinitionError, match='language: .*unknown language "klingon"; use one of en, zh-hans'):
        parse_definition(definition)


def test_the_language_cannot_change_once_participants_exist(counselor_zh, client, tmp_path):
    client.get(_link(counselor_zh))
    client.post("/s/counselor-zh/consent/", {"decision": "accept"})
    path = tmp_path / "counselor_zh.json"
    path.write_text((ROOT / "fixtures" / "counselor_zh.json").read_text().replace('"zh-hans"', '"en"'))
    from django.core.management.base import CommandError

    with pytest.raises(CommandError, match="language"):
        call_command("load_study", str(path))
    counselor_zh.refresh_from_db()
    assert counselor_zh.language == "zh-hans"


# --- the pages of a Chinese study ----------------------------------------------------------------


def test_the_pages_of_a_chinese_study_are_in_chinese(counselor_zh, client):
    response = client.get(_link(counselor_zh), follow=True)
    html = _html(response)
    assert '<html lang="zh-hans" dir="ltr">' in html
    assert response.headers["Content-Language"] == "zh-hans"
    for text in ("参与知情同意", "我同意参加", "我不同意", "跳到正文"):
        assert text in html
    assert "I agree to take part" not in html


def test_validation_messages_are_in_the_study_language(counselor_zh, client):
    client.get(_link(counselor_zh))
    client.post("/s/counselor-zh/consent/", {"decision": "accept"})
    client.post("/s/counselor-zh/instructions/")
    page = client.get("/s/counselor-zh/page/")
    visit = re.search(r'name="visit" value="(\d+)"', _html(page)).group(1)
    response = client.post("/s/counselor-zh/page/", {"visit": visit})
    html = _html(response)
    assert response.status_code == 400
    assert "请检查 6 个答案" in html  # 2 replies x 3 dimensions
    assert "请为回复 1 的“共情共鸣”评分。" in html
    assert "Please rate" not in html


def test_a_fixed_answer_is_shown_translated_and_stored_in_english(counselor_zh, client):
    client.get(_link(counselor_zh))
    client.post("/s/counselor-zh/consent/", {"decision": "accept"})
    client.post("/s/counselor-zh/instructions/")
    while _answer_current_page(client, counselor_zh) in ("block", "check"):
        pass
    form = _html(client.get("/s/counselor-zh/about-you/"))
    assert f'<option value="{PREFER_NOT}">不愿回答</option>' in form
    bad = client.post("/s/counselor-zh/about-you/", {"experience_years": "abc", "role": PREFER_NOT})
    assert "请输入 0 到 60 之间的数字。" in _html(bad)
    done = client.post("/s/counselor-zh/about-you/", {"experience_years": "7", "role": PREFER_NOT}, follow=True)
    participant = Participant.objects.get(study=counselor_zh)
    assert participant.demographics == {"experience_years": "7", "role": PREFER_NOT}
    html = _html(done)
    assert "谢谢，您已完成本研究" in html
    # The date in the study language's format (Django's zh_Hans DATE_FORMAT "Y年n月j日").
    finished = participant.finished_at
    assert f"完成于 {finished.year}年{finished.month}月{finished.day}日。" in html


def test_the_language_does_not_leak_into_the_next_request(counselor_zh, client):
    client.get(_link(counselor_zh), follow=True)
    html = _html(client.get("/"))
    assert '<html lang="en" dir="ltr">' in html and "Skip to content" in html


def test_an_english_study_stays_in_english(counselor, client):
    response = client.get(_link(counselor), follow=True)
    assert '<html lang="en" dir="ltr">' in _html(response) and "I agree to take part" in _html(response)
    assert response.headers["Content-Language"] == "en"


# --- right-to-left scripts -----------------------------------------------------------------------


@override_settings(LANGUAGES=[("en", "English"), ("zh-hans", "简体中文"), ("ar", "العربية")])
def test_a_right_to_left_language_turns_the_page_right_to_left(db, client):
    """Only complete translations ship, so Arabic is added for this test only: its pages
    fall back to English texts, but the document flows right to left."""
    definition = read_definition_file(ROOT / "fixtures" / "counselor_zh.json")
    definition.update(slug="counselor-ar", language="ar")
    study = study_load(definition=parse_definition(definition)).study
    html = _html(client.get(_link(study), follow=True))
    assert '<html lang="ar" dir="rtl">' in html


PHYSICAL_SIDES = re.compile(
    r"(?<![\w-])(?:margin|padding|border)-(?:left|right)\b|(?<![\w-])(?:left|right)\s*:|text-align\s*:\s*(?:left|right)"
    r"|float\s*:\s*(?:left|right)"
)


def test_the_participant_stylesheet_uses_logical_sides_only():
    """Margins, paddings, borders and offsets by inline-start/end follow the text direction."""
    css = re.sub(r"/\*.*?\*/", "", (ROOT / "static" / "css" / "site.css").read_text(), flags=re.S)
    assert PHYSICAL_SIDES.findall(css) == []
    assert "inline-start" in css
    assert PHYSICAL_SIDES.search("p { margin-left: 1rem }") and PHYSICAL_SIDES.search(".a { left: 0 }")
