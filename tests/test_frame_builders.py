"""The frames a run builds by name (analysis.running.frame_builders): one builder per name an analysis may
take, only the frames the quality rules and the chosen analyses read, an empty frame (and no query) where the
design lacks the feature, and the statistics' split of them into the retained and the looser participant
sets."""

from __future__ import annotations

import pandas as pd

from analysis import frames, pipeline, registry
from analysis.design import study_design
from analysis.running import frame_builders
from tests.support.researcher import fill_with_bots


def test_every_input_an_analysis_names_has_one_builder():
    assert set(frame_builders.FRAME_BUILDERS) == set(registry.INPUTS)
    assert {name for a in registry.REGISTERED for name in a.inputs} <= set(registry.INPUTS)
    assert set(frame_builders.QUALITY_INPUTS) <= set(registry.INPUTS)


def test_a_run_needs_the_quality_frames_and_those_its_analyses_name():
    by_name = registry.ANALYSES
    assert frame_builders.frames_needed([]) == ("ratings", "participants", "gold")
    assert frame_builders.frames_needed([by_name["pairwise_win_rates"]]) == ("ratings", "participants", "gold",
                                                                            "pairwise")
    judged = [a for a in registry.REGISTERED if "judge_pairwise" in a.inputs]
    assert judged and frame_builders.frames_needed(judged)[-1] == "judge_pairwise"
    # A sensitivity variant reads what its base reads.
    variant = next(a for a in registry.REGISTERED if a.sensitivity_of)
    assert set(frame_builders.frames_needed([variant])) == set(frame_builders.QUALITY_INPUTS) | set(
        registry.base_of(variant).inputs)


def test_a_frame_whose_feature_the_design_lacks_is_empty_and_costs_no_query(tide, django_assert_num_queries):
    design = study_design(tide.pk)
    assert "pairwise" not in design.features and "judges" not in design.features
    with django_assert_num_queries(0):
        built = frame_builders.frames_build(tide.pk, design, ("pairwise", "judges", "judge_pairwise"))
    assert set(built) == {"pairwise", "judges", "judge_pairwise"} and all(frame.empty for frame in built.values())


def test_a_pairwise_study_builds_its_pairwise_frame_and_the_statistics_narrow_it_to_the_kept(pairwise):
    fill_with_bots(pairwise, 6)
    design = study_design(pairwise.pk)
    chosen = registry.statistics_analyses(design=design.features)
    built = frame_builders.frames_build(pairwise.pk, design, frame_builders.frames_needed(chosen))
    assert set(built) == {"ratings", "participants", "gold", "pairwise"}
    assert built["pairwise"]["participant_id"].nunique() == 6
    dropped, loose_only = built["participants"]["participant_id"].iloc[:2]
    people = built["participants"].assign(excluded_by=[
        "speed" if pid == dropped else pipeline.SENSITIVITY_RULE if pid == loose_only else ""
        for pid in built["participants"]["participant_id"]])
    inputs = pipeline.statistics_inputs({**built, "participants": people})
    kept, loose = inputs.kept["pairwise"], inputs.loose["pairwise"]
    assert set(kept["participant_id"]) == set(built["pairwise"]["participant_id"]) - {dropped, loose_only}
    assert set(loose["participant_id"]) == set(built["pairwise"]["participant_id"]) - {dropped}
    # The frames that are not people's answers are handed on whole.
    pd.testing.assert_frame_equal(inputs.kept["gold"], built["gold"])


def test_a_frame_an_analysis_names_but_the_caller_left_out_fails_that_analysis_alone(tide):
    design = study_design(tide.pk)
    fill_with_bots(tide, 3)
    built = frame_builders.frames_build(tide.pk, design, frame_builders.QUALITY_INPUTS)
    people = built["participants"].assign(excluded_by="")
    computed = pipeline.compute_statistics({**built, "participants": people},
                                           analyses=[registry.ANALYSES["descriptives"],
                                                     registry.ANALYSES["pairwise_position_bias"]], design=design)
    assert "descriptives" in computed.tables
    assert computed.failures["pairwise_position_bias"].startswith("KeyError")


def test_each_builder_gives_the_frame_the_frames_module_reads_for_its_name(tide):
    fill_with_bots(tide, 3)
    design = study_design(tide.pk)
    built = frame_builders.frames_build(tide.pk, design, registry.INPUTS)
    assert set(built) == set(registry.INPUTS)
    pd.testing.assert_frame_equal(built["ratings"], frames.ratings_frame(tide.pk))
    pd.testing.assert_frame_equal(built["participants"], frames.participants_frame(tide.pk, design))
    pd.testing.assert_frame_equal(built["gold"], frames.gold_frame(tide.pk))
    assert built["ratings"]["participant_id"].nunique() == 3
