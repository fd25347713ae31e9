import pytest
from surveys import bots
from surveys.models import Participant, Rating, BlockVisit

def test_smoke(tide):
    run = bots.run_in_process(persona=bots.Persona(), study=tide, seed=1)
    print(run.outcome, run.completion_code, len(run.submitted), run.simulated_seconds/60)
    print(run.acknowledged[:3])
    assert run.outcome == "completed"
    p = Participant.objects.get()
    print(p.__dict__)
    assert Rating.objects.count() == 120

def test_services(tide):
    for i, name in enumerate(bots.PERSONAS):
        run = bots.run_with_services(persona=bots.persona_named(name), study=tide, seed=10 + i)
        print(name, run.outcome, run.simulated_seconds/60)
