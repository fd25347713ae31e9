"""Short-hands for walking a participant through the real views (the ``steps`` fixture)."""

from __future__ import annotations

from bots.channels import entry_for
from bots.pages import page_spec_from_html
from bots.personas import expected_check_value
from surveys.models import Participant, Study


class SurveySteps:
    """Short-hands for walking a participant through the real views with a test Client."""

    def link(self, study, external_id: str = "a" * 24) -> str:
        """The entry link of the study's recruitment channel (an invited study makes a new rater link)."""
        if study.recruitment_mode == Study.RecruitmentMode.PANEL:
            return f"/s/{study.slug}/?{study.id_param}={external_id}&STUDY_ID=st1&SESSION_ID=se1"
        return entry_for(study, external_id=external_id).path

    def start(self, client, study, external_id: str = "a" * 24):
        """Enter (by the study's channel), consent and read the instructions; returns the participant.

        ``external_id`` is the panel id; an open link's or an invited rater's id is the server's."""
        client.get(self.link(study, external_id))
        client.post(f"/s/{study.slug}/consent/", {"decision": "accept"})
        client.post(f"/s/{study.slug}/instructions/")
        return Participant.objects.get(pk=client.session[f"survey:{study.slug}"]["participant_id"])

    def page(self, client, study):
        """(response, PageSpec) of the participant's current page."""
        response = client.get(f"/s/{study.slug}/page/", follow=True)
        return response, page_spec_from_html(response.content.decode())

    def answers(self, spec, rating: int = 4) -> dict:
        """Complete, valid answers for a block or check page (rank = display order)."""
        if spec.kind == "check":
            return {"visit": spec.visit_id, "attention": expected_check_value(spec.statement, spec.check_points)}
        data = {"visit": spec.visit_id}
        for i, pid in enumerate(spec.placements, start=1):
            for key in spec.by_type.get("rating", {}):
                data[f"rate-{pid}-{key}"] = rating
            if "ranking" in spec.by_type:
                data[f"rank-{pid}"] = i
        if "best_worst" in spec.by_type:
            data["most"], data["least"] = spec.placements[0], spec.placements[-1]
        if "pairwise" in spec.by_type:
            data["preference"] = "left"
        return data

    def submit_current(self, client, study, **overrides):
        response, spec = self.page(client, study)
        data = {**self.answers(spec), **overrides}
        return client.post(f"/s/{study.slug}/page/", data), spec

    def finish(self, client, study, demographics: dict | None = None):
        """Answer every remaining page and the demographics; returns the last response."""
        while True:
            response, spec = self.page(client, study)
            if spec.kind not in {"block", "check"}:
                break
            client.post(f"/s/{study.slug}/page/", self.answers(spec))
        return client.post(f"/s/{study.slug}/about-you/", demographics or {}, follow=True)
