"""A study's design as the analyses see it: what it compares, asks and groups by.

Built from the study's definition (``surveys.definition``), never from names
in the code: the baseline and treatment conditions, the references, the
construct judged, the demographic questions, the subgroup comparisons, the
region map, and the features (``analysis.registry.FEATURES``) that decide
which analyses a run computes. ``design_of`` is pure; ``study_design`` reads
the study.
"""

from __future__ import annotations

from collections.abc import Mapping
import dataclasses
from dataclasses import dataclass, field
from typing import Any

from analysis.regions import STATE_REGION
from analysis.stats.groups import Group, Subgroup
from analysis.stats.headline import DemographicQuestion
from surveys import definition as study_definition
from surveys.definition import StudyDefinition

#: Built-in region maps: name -> (answer -> region).
BUILT_IN_REGION_MAPS: dict[str, Mapping[str, str]] = {"us_census": STATE_REGION}


@dataclass(frozen=True)
class Design:
    """What a study compares and asks, for the analyses (see the module docstring)."""

    construct: str = "preferred"
    baseline: str | None = None
    treatment: str | None = None
    references: tuple[str, ...] = ()
    demographics: tuple[str, ...] = ()
    #: The demographic questions as plain values (key, type, choices), for the demographics table.
    demographic_questions: tuple[DemographicQuestion, ...] = ()
    subgroups: tuple[Subgroup, ...] = ()
    region_demographic: str | None = None
    region_map: Mapping[str, str] = field(default_factory=dict)
    region_map_name: str = ""
    has_ratings: bool = True
    has_ranking: bool = False
    has_best_worst: bool = False
    has_pairwise: bool = False
    has_gold: bool = False
    #: Some judge (judges/, or an automatic metric of a finished metrics run) has answered the study's blocks.
    has_judges: bool = False
    #: Every participant judges every block (allocation "all"); False when each judges a share of them.
    complete_blocks: bool = True

    @property
    def features(self) -> frozenset[str]:
        present = {
            "ratings": self.has_ratings,
            "ranking": self.has_ranking,
            "best_worst": self.has_best_worst,
            "pairwise": self.has_pairwise,
            "comparison": self.baseline is not None,
            "references": bool(self.references),
            "demographics": bool(self.demographic_questions),
            # The reference is judged beside the other responses of its blocks (rated, ranked or chosen); a
            # pairwise-only study compares it in pairwise_win_rates instead.
            "reference_judged": bool(self.references) and (self.has_ratings or self.has_ranking
                                                            or self.has_best_worst),
            "subgroups": bool(self.subgroups),
            "regions": self.region_demographic is not None,
            "gold": self.has_gold,
            "judges": self.has_judges,
        }
        return frozenset(name for name, on in present.items() if on)

    @property
    def options(self) -> dict[str, Any]:
        """Every keyword an analysis may ask of the design (``Analysis.design_options``)."""
        return {"baseline": self.baseline, "treatment": self.treatment, "references": self.references,
                "subgroups": self.subgroups, "complete_blocks": self.complete_blocks,
                "demographic_questions": self.demographic_questions}

    def options_for(self, design_options: tuple[str, ...]) -> dict[str, Any]:
        return {name: self.options[name] for name in design_options}

    def region_of(self, answer: Any) -> str:
        """The region of one answer to the region question; "" when blank, unmapped or the study has no regions."""
        if answer is None or not self.region_map:
            return ""
        text = str(answer).strip()
        if self.region_map_name == "us_census":
            text = text.upper()
        return self.region_map.get(text, "")

    @property
    def us_map(self) -> bool:
        """Regions are US Census regions, so the results page can draw them on a US map."""
        return self.region_map_name == "us_census"


def design_of(definition: StudyDefinition, *, has_gold: bool = False) -> Design:
    """The design of a validated definition (pure)."""
    regions = definition.regions
    region_map: Mapping[str, str] = {}
    region_map_name = ""
    if regions is not None:
        if isinstance(regions.map, str):
            region_map_name, region_map = regions.map, BUILT_IN_REGION_MAPS[regions.map]
        else:
            region_map = dict(regions.map)
    comparison = definition.comparison
    return Design(
        construct=definition.construct,
        baseline=comparison.baseline if comparison else None,
        treatment=comparison.treatment if comparison else None,
        references=tuple(definition.reference_conditions),
        demographics=tuple(q.key for q in definition.demographics),
        demographic_questions=tuple(DemographicQuestion(q.key, q.type, tuple(q.choices))
                                    for q in definition.demographics),
        subgroups=tuple(Subgroup.of(spec) for spec in definition.subgroups),
        region_demographic=regions.demographic if regions else None,
        region_map=region_map,
        region_map_name=region_map_name,
        has_ratings=bool(definition.dimensions),
        has_ranking=definition.ranking,
        has_best_worst=definition.best_worst,
        has_pairwise=definition.pairwise,
        has_gold=has_gold,
        complete_blocks=_judges_every_block(definition),
    )


def _judges_every_block(definition: StudyDefinition) -> bool:
    """Whether every participant judges every block: the study's ``allocation`` is "all" (the default)."""
    allocation = getattr(definition, "allocation", "all")
    return allocation is None or allocation == "all"


def study_design(study_id: int) -> Design:
    """The design of a stored study, from the definition it was loaded from."""
    from analysis.models import GoldScore
    from surveys.models import Study

    study = Study.objects.only("definition").get(pk=study_id)
    definition = study_definition.StudyDefinition.model_validate(study.definition)
    has_gold = GoldScore.objects.filter(item__block__study_id=study_id).exists()
    return dataclasses.replace(design_of(definition, has_gold=has_gold), has_judges=_has_judges(study_id))


def _has_judges(study_id: int) -> bool:
    from analysis.judge_source import judge_source
    from analysis.models import MetricsRun

    source = judge_source()
    return ((source is not None and source.has_answers(study_id))
            or MetricsRun.objects.filter(study_id=study_id, status="done").exists())
