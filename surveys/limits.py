"""Lengths of the text columns that a study definition (and a panel link) fills.

One source for the columns (``surveys.models``) and for the schema that checks
a definition before anything is written (``surveys.definition``): a text the
schema accepts always fits its column, so an over-long one is refused at load
with its path instead of failing in the database (PostgreSQL enforces
``varchar(n)``; SQLite does not, which hid the difference). Changing a value
here changes a column: it needs a migration.
"""

from __future__ import annotations

SLUG = 64
KEY = 50  # scenario, block, dimension, attention check and free-text keys
ITEM_KEY = 60  # response ids
TITLE = 200
LANGUAGE = 15  # a language code of settings.LANGUAGES, e.g. "zh-hans"
SYSTEM_NAME = 100
CONDITION_NAME = 50
SCENARIO_LABEL = 200
DIMENSION_LABEL = 200
SOURCE_LABEL = 20  # A-E on best-worst pages
DEMOGRAPHIC_KEY = 20
DEMOGRAPHIC_PROMPT = 300
PANEL_PARAM = 64  # names of the link's query parameters (PROLIFIC_PID, ...)
ID_PATTERN = 200
COMPLETION_CODE = 64
COMPLETION_URL = 500
EXTERNAL_ID = 128  # a panel id, in links and in imported files
PANEL_VALUE = 128  # the panel's study and session ids
RATER_NAME = 100  # an invited rater's name, as the researcher wrote it

DEMOGRAPHIC_CHOICE = 300  # one answer a demographic question offers
DEMOGRAPHIC_TEXT = 2000  # the longest a short-text demographic answer may be
GROUP_LABEL = 100  # a subgroup's label (ttests.csv group_a / group_b)
REGION_NAME = 100
CONSTRUCT = 60  # the construct judged, e.g. "helpful"
