"""The Chinese copy of the counselor study, end to end in chromium: every page in
Simplified Chinese (lang="zh-hans"), a validation message and the date included,
with what was clicked stored exactly, demographic fixed answers in English."""

from __future__ import annotations

import re

import pytest

from surveys.definition import PREFER_NOT
from surveys.models import Participant, Rating
from tests.support.browser import browser, new_page  # noqa: F401
from tests.support.studies import load_fixture
from tests.support.survey_steps import SurveySteps

pytestmark = [
    pytest.mark.browser,
    pytest.mark.slow(reason="browser: the counselor study in Chinese, beyond the default journeys"),
    pytest.mark.django_db(transaction=True),
]


def _kind(page) -> str:
    return page.evaluate(
        """() => document.querySelector('[data-completion-code]') ? 'done'
              : (document.querySelector('form[data-page]') || {dataset: {}}).dataset.page || ''"""
    )


def _assert_chinese_page(page) -> None:
    assert page.locator("html").get_attribute("lang") == "zh-hans"
    assert page.locator("html").get_attribute("dir") == "ltr"
    body = page.locator("body").inner_text()
    for english in ("Next", "Exit the study", "Block ", "Please "):
        assert english not in body, (english, page.url)


def test_a_participant_takes_the_chinese_counselor_study_in_chinese(live_server, browser):  # noqa: F811
    study = load_fixture("counselor_zh.json")
    page = new_page(browser)
    try:
        page.goto(live_server.url + SurveySteps().link(study))  # an invited rater's personal link
        page.get_by_role("heading", name="参与知情同意").wait_for()
        _assert_chinese_page(page)
        assert page.title() == "知情同意 – 为寻求支持者的回复评分"  # the participant title, never the researchers'
        page.get_by_role("button", name="我同意参加").click()

        page.get_by_role("heading", name="说明").wait_for()
        _assert_chinese_page(page)
        assert "第 0 组，共 4 组" in page.locator("body").inner_text()
        page.get_by_role("button", name="开始").click()
        page.wait_for_url("**/page/")

        # A block sent incomplete: the summary and the messages are in Chinese, nothing is stored.
        page.get_by_role("heading", name="第 1 组，共 4 组").wait_for()
        _assert_chinese_page(page)
        assert "求助者的留言" in page.locator("#scenario").inner_text()
        first = page.locator("section.response").first
        first.get_by_role("radio", name="4 (较好)").first.check()
        page.get_by_role("button", name="下一步").click()
        summary = page.locator("[data-error-summary]")
        summary.wait_for()
        assert "请检查 5 个答案" in summary.inner_text()
        assert "请为回复 2 的“共情共鸣”评分。" in summary.inner_text()
        assert "错误：" in page.locator(".error-message").first.inner_text()
        _assert_chinese_page(page)
        assert Rating.objects.count() == 0

        clicked = 0
        while (kind := _kind(page)) in ("block", "check"):
            _assert_chinese_page(page)
            if kind == "check":
                legend = page.locator("legend").first.inner_text()
                assert legend.startswith("这是注意力检查")
                value = re.search(r"选择 (\d)", legend).group(1)
                page.locator(f"input[name=attention][value='{value}']").check()
            else:
                for group in page.locator("section.response fieldset").all():
                    group.locator("input[type=radio][value='5']").check()
                    clicked += 1
            page.get_by_role("button", name="下一步").click()
            page.wait_for_load_state()

        assert _kind(page) == "demographics"
        page.get_by_role("heading", name="关于您的几个问题").wait_for()
        _assert_chinese_page(page)
        page.get_by_label("您有多少年的心理咨询经验？").fill("70")
        page.get_by_label("您的身份是？").select_option(label="不愿回答")
        page.get_by_role("button", name="完成").click()
        page.locator("[data-error-summary]").wait_for()
        assert "请输入 0 到 60 之间的数字。" in page.locator("[data-error-summary]").inner_text()

        page.get_by_label("您有多少年的心理咨询经验？").fill("6")
        page.get_by_role("button", name="完成").click()
        page.wait_for_url(f"{live_server.url}/s/counselor-zh/done/")
        _assert_chinese_page(page)
        participant = Participant.objects.get(study=study)
        finished = participant.finished_at
        body = page.locator("body").inner_text()
        assert "谢谢，您已完成本研究" in body
        assert f"完成于 {finished.year}年{finished.month}月{finished.day}日。" in body
        assert page.locator("[data-completion-code]").count() == 0  # an invited rater has no panel to show it to

        assert participant.status == "completed"
        assert participant.demographics == {"experience_years": "6", "role": PREFER_NOT}
        assert clicked == 4 * 2 * 3
        assert set(Rating.objects.filter(placement__visit__participant=participant).values_list("value", flat=True)) == {5}
        assert Rating.objects.filter(placement__visit__participant=participant).count() == clicked
    finally:
        page.context.close()
