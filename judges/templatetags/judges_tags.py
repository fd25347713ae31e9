"""The dashboard's line about the judges (progress and cost), so the dashboard view needs no change."""

from django import template

from judges.selectors import judge_runs_progress

register = template.Library()


@register.inclusion_tag("judges/_dashboard_line.html")
def judges_line(study):
    return {"study": study, "runs": judge_runs_progress(study=study)}
