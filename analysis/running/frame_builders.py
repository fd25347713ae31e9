"""The frames a run builds, each by its name (``registry.INPUTS``, what an analysis's ``inputs`` name).

Each name has a builder of the study's rows and, where the frame exists only for some designs, the design
feature it needs: without it the frame is empty and costs no query. A run builds the frames that the quality
rules read and those its analyses name, nothing else, and hands them on as one mapping (name -> frame) to the
statistics, the parts' file and a part that rebuilds them.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

import pandas as pd

from analysis import frames, registry
from analysis.design import Design
from analysis.judge_source import judge_source

#: A run's frames by name.
Frames = Mapping[str, pd.DataFrame]


@dataclass(frozen=True)
class FrameBuilder:
    build: Callable[[int, Design], pd.DataFrame]
    #: The design feature (``Design.features``) without which the frame is empty (and is not queried).
    feature: str | None = None


def _judge_ratings(study_id: int, design: Design) -> pd.DataFrame:
    source = judge_source()
    return source.ratings_frame(study_id) if source else pd.DataFrame()


def _judge_pairwise(study_id: int, design: Design) -> pd.DataFrame:
    source = judge_source()
    return source.pairwise_frame(study_id) if source else pd.DataFrame()


FRAME_BUILDERS: dict[str, FrameBuilder] = {
    "ratings": FrameBuilder(lambda study_id, design: frames.ratings_frame(study_id)),
    "participants": FrameBuilder(frames.participants_frame),
    "gold": FrameBuilder(lambda study_id, design: frames.gold_frame(study_id)),
    "pairwise": FrameBuilder(lambda study_id, design: frames.pairwise_frame(study_id), feature="pairwise"),
    # The judges' answers (the registered judge_source: judges.selectors).
    "judges": FrameBuilder(_judge_ratings, feature="judges"),
    "judge_pairwise": FrameBuilder(_judge_pairwise, feature="judges"),
}

#: The frames the quality rules read (``quality.apply_quality_rules``): every run builds them.
QUALITY_INPUTS = ("ratings", "participants", "gold")


def frames_needed(analyses: Iterable[registry.Analysis]) -> tuple[str, ...]:
    """The frames the quality rules and ``analyses`` read (a sensitivity variant reads its base's), in
    ``registry.INPUTS`` order."""
    names = set(QUALITY_INPUTS)
    for analysis in analyses:
        names.update(registry.base_of(analysis).inputs if analysis.sensitivity_of else analysis.inputs)
    return tuple(name for name in registry.INPUTS if name in names)


def frames_build(study_id: int, design: Design, names: Iterable[str]) -> dict[str, pd.DataFrame]:
    """The frames ``names`` of a study; one whose feature the design lacks is empty (no query)."""
    built = {}
    for name in names:
        builder = FRAME_BUILDERS[name]
        present = builder.feature is None or builder.feature in design.features
        built[name] = builder.build(study_id, design) if present else pd.DataFrame()
    return built
