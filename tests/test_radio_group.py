"""The repeated controls of the participant pages (surveys/templatetags/survey_controls.py), drawn in Python since
issue 31: the markup, written out here by hand, with the participant's choice, an error, and text to escape."""

from django.template import Context, Template
from django.utils import translation

from surveys.questions.controls import Control, Option
from surveys.templatetags.survey_controls import radio_group


def _control(**extra) -> Control:
    options = [Option(value=str(v), label=f"{v} (<b>&</b>)", input_id=f"id-q-{v}", selected=v == 2) for v in (1, 2)]
    return Control(name="q", label='Is it "kind"?', options=options, **extra)


def test_a_group_with_a_choice_made():
    assert str(radio_group(_control())) == (
        '<fieldset class="scale" id="fs-q">\n'
        "  <legend>Is it &quot;kind&quot;?</legend>\n"
        "  \n"
        '  <div class="scale-options">\n'
        "    \n"
        '    <label class="scale-option" for="id-q-1"><input type="radio" id="id-q-1" name="q" value="1">'
        " <span>1 (&lt;b&gt;&amp;&lt;/b&gt;)</span></label>\n"
        "    \n"
        '    <label class="scale-option" for="id-q-2"><input type="radio" id="id-q-2" name="q" value="2" checked>'
        " <span>2 (&lt;b&gt;&amp;&lt;/b&gt;)</span></label>\n"
        "    \n"
        "  </div>\n"
        "</fieldset>\n"
    )


def test_a_group_with_an_error_points_to_it_in_the_page_language():
    with translation.override("zh-hans"):
        html = str(radio_group(_control(error="Pick <one>")))
        error_word = translation.gettext("Error:")
    assert error_word != "Error:"
    assert html.startswith('<fieldset class="scale has-error" id="fs-q" aria-describedby="err-q">\n')
    assert (f'<p class="error-message" id="err-q"><span class="visually-hidden">{error_word} </span>'
            "Pick &lt;one&gt;</p>") in html
    assert html.count(' aria-invalid="true"') == 2
    assert 'value="2" checked aria-invalid="true">' in html


def test_the_tag_in_a_template():
    rendered = Template("{% load survey_controls %}{% radio_group control %}").render(Context({"control": _control()}))
    assert rendered == str(radio_group(_control()))
    assert "&lt;b&gt;" in rendered and "<b>" not in rendered


def test_a_selects_options_with_the_choice_made():
    from surveys.templatetags.survey_controls import select_options

    control = Control(name="rank", label="", options=[Option(value="", label="–"), Option(value="1", label="1 <&>"),
                                                       Option(value="2", label="2", selected=True)])
    assert str(select_options(control)) == (
        '<option value="">–</option><option value="1">1 &lt;&amp;&gt;</option><option value="2" selected>2</option>'
    )
