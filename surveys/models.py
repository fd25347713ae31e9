"""The surveys app's models: the platform's own (``surveys.core_models``: studies, their content,
participants and the pages they are shown) and where each question type keeps its answers, which is the
type's own (``surveys.questions``):

- a model declared in its unit: rating's ``Rating``, free text's ``FreeTextQuestion`` and ``FreeTextAnswer``;
- columns on the rows every block page writes anyway (``AnswerColumns``): ranking's ``rank`` and best-worst's
  ``choice`` on ``ItemPlacement``, pairwise's ``preference`` on ``BlockVisit``;
- or, for a type registered later, ``TypedAnswer`` rows.

Importing the types here, once every model they refer to exists, makes their models this app's and puts their
columns on the core models before anything reads them. Every model is imported from here.
"""

from .core_models import *  # noqa: F403
from .questions import answer_storage_install

answer_storage_install()

from .questions.free_text import FreeTextAnswer, FreeTextQuestion  # noqa: E402, F401
from .questions.rating import Rating  # noqa: E402, F401
