"""Statistics without Django, and stored tables that keep every float exactly (issue 26, items 5 and 6)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from analysis.models import AnalysisRun, ResultTable
from analysis.running.runs import ANALYSIS, _tables_write
from analysis.stats.groups import PREFER_NOT
from surveys.definition import PREFER_NOT as DEFINITION_PREFER_NOT

ROOT = Path(__file__).resolve().parent.parent

PLAIN_RUN = """
import sys
import numpy as np, pandas as pd
import analysis.stats as S
from analysis.stats.groups import Group, Subgroup
assert not [m for m in sys.modules if m == "django" or m.startswith(("django.", "surveys"))], "Django was imported"
rng = np.random.default_rng(0)
ratings = pd.DataFrame({"participant_id": np.repeat([f"p{i}" for i in range(8)], 4),
    "block_id": np.tile(["b1", "b1", "b2", "b2"], 8), "scenario": "S1", "response_id": np.tile(["r1", "r2", "r3", "r4"], 8),
    "model": "A", "condition": np.tile(["base", "tuned"], 16), "rating": rng.integers(1, 6, 32).astype(float)})
participants = pd.DataFrame({"participant_id": [f"p{i}" for i in range(8)], "age": ["30", "70"] * 4})
older = Subgroup("age", "age", Group("60+", at_least=60), Group("under 60", below=60))
print(len(S.dimension_wilcoxon(ratings, baseline="base", treatment="tuned")),
      len(S.group_ttests(ratings, participants, subgroups=[older])), S.win_table(ratings, baseline="base",
      treatment="tuned")["winner"].iloc[0] != "")
"""


def test_analysis_stats_imports_and_runs_in_a_plain_python_process():
    env = {key: value for key, value in os.environ.items() if key != "DJANGO_SETTINGS_MODULE"}
    done = subprocess.run([sys.executable, "-c", PLAIN_RUN], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["4", "2", "True"]


def test_the_plain_prefer_not_answer_is_the_definitions():
    assert PREFER_NOT == DEFINITION_PREFER_NOT


EXACT = [1e-300, 3.820460904919432e-09, 0.1 + 0.2, 1 / 3, 2.2250738585072014e-308, 123456789.12345679]


@pytest.mark.django_db
def test_stored_tables_read_back_every_float_exactly(tide):
    run = AnalysisRun.objects.create(study=tide)
    frame = pd.DataFrame({"p": EXACT, "label": ["a", "b", "c", "d", "e", "f"],
                          "n": np.arange(6), "mixed": pd.Series([0.1 + 0.2, "x", None, np.nan, 7, np.inf],
                                                                dtype=object)})
    _tables_write(ANALYSIS, run.pk, {"exact": frame}, {})
    stored = ResultTable.objects.get(run=run, name="exact")
    stored.refresh_from_db()
    assert stored.columns == ["p", "label", "n", "mixed"]
    read = [row[0] for row in stored.rows]
    assert read == EXACT  # bit for bit: == on floats, no tolerance
    assert all(float(a).hex() == float(b).hex() for a, b in zip(read, EXACT))
    assert [row[2] for row in stored.rows] == list(range(6))
    assert [row[3] for row in stored.rows] == [0.30000000000000004, "x", None, None, 7, None]
