"""Surface perturbations of responses, to test how robust a rating predictor is.

The seven perturbations of the Indiana report: excessive punctuation and letter
repetition, Greek look-alike characters, spelling errors, leetspeak, shortening,
elevated language and casual language. A robust predictor of perceived empathy
should barely move under the first five when they leave the meaning intact.

Every perturbation is deterministic: the random ones draw from a generator
seeded by (seed, perturbation, SHA-256 of the text), so the same text gets the
same perturbation in any process and in any order. Those that use chance are
forced to change at least one eligible character, so "changed" is guaranteed
whenever the text has something to change. Pure library code.
"""

from __future__ import annotations

import hashlib
import math
import random
import re
from collections.abc import Callable, Mapping, Sequence
from typing import Protocol

import numpy as np
import pandas as pd

PERTURBATIONS = (
    "punctuation_repetition",
    "greek_lookalikes",
    "spelling_errors",
    "leetspeak",
    "shortening",
    "elevated_language",
    "casual_language",
)

# Latin letters and the Greek letters that render (nearly) the same.
GREEK_LOOKALIKES = {
    "A": "Α", "B": "Β", "E": "Ε", "H": "Η", "I": "Ι", "K": "Κ", "M": "Μ", "N": "Ν",
    "O": "Ο", "P": "Ρ", "T": "Τ", "X": "Χ", "Y": "Υ", "Z": "Ζ",
    "i": "ι", "k": "κ", "o": "ο", "p": "ρ", "u": "υ", "v": "ν", "x": "χ",
}
LEET = {"a": "4", "e": "3", "i": "1", "o": "0", "s": "5", "t": "7", "l": "1", "g": "9", "b": "8"}

ELEVATED_WORDS = {
    "help": "assist", "helps": "assists", "helping": "assisting",
    "get": "obtain", "need": "require", "needs": "requires",
    "feelings": "sentiments",
    "sad": "melancholy", "happy": "elated", "hard": "arduous", "tough": "arduous",
    "scared": "apprehensive", "afraid": "apprehensive", "worried": "apprehensive",
    "angry": "indignant", "upset": "distraught", "tired": "fatigued",
    "sorry": "regretful", "really": "genuinely", "very": "exceedingly",
    "big": "substantial", "small": "modest", "good": "favourable", "bad": "unfavourable",
    "try": "endeavour", "show": "demonstrate", "start": "commence", "end": "conclude",
    "talk to": "confer with", "talk": "converse", "think": "contemplate", "understand": "comprehend",
    "maybe": "perhaps", "okay": "acceptable", "friend": "companion", "friends": "companions",
    "job": "occupation", "buy": "purchase", "use": "utilize", "enough": "sufficient",
    "a lot of": "a considerable amount of", "find out": "ascertain", "deal with": "contend with",
    "it's": "it is", "you're": "you are", "don't": "do not", "can't": "cannot", "i'm": "I am",
}
CASUAL_WORDS = {
    "you": "u", "your": "ur", "you're": "ur", "are": "r", "because": "cuz",
    "going to": "gonna", "want to": "wanna", "have to": "gotta", "got to": "gotta",
    "really": "rly", "okay": "ok", "please": "pls", "thanks": "thx", "thank you": "thx",
    "though": "tho", "probably": "prolly", "something": "smth", "very": "super",
    "hello": "hey", "yes": "yeah", "difficult": "tough", "understand": "get",
    "i am": "i'm", "do not": "don't", "cannot": "can't", "it is": "it's", "that is": "that's",
    "to be honest": "tbh", "i don't know": "idk", "by the way": "btw", "be right back": "brb",
    "people": "ppl", "about": "abt", "with": "w/", "definitely": "def", "sorry": "sry",
}


# --------------------------------------------------------------------------- helpers


def _rng(seed: int, kind: str, text: str) -> random.Random:
    digest = hashlib.sha256(text.encode("utf-8")).hexdigest()
    return random.Random(f"{seed}:{kind}:{digest}")  # str seeds hash the same in every process


def _replace_chars(text: str, mapping: Mapping[str, str], rng: random.Random, rate: float) -> str:
    """Replace each mapped character with probability ``rate``; at least one if any is eligible."""
    eligible = [i for i, ch in enumerate(text) if ch in mapping]
    if not eligible:
        return text
    chosen = {i for i in eligible if rng.random() < rate} or {rng.choice(eligible)}
    return "".join(mapping[ch] if i in chosen else ch for i, ch in enumerate(text))


def _match_case(original: str, replacement: str) -> str:
    if original.isupper() and len(original) > 1:
        return replacement.upper()
    if original[:1].isupper():
        return replacement[:1].upper() + replacement[1:]
    return replacement


def _substitute(text: str, dictionary: Mapping[str, str]) -> str:
    """Replace whole words and phrases, longest first, keeping the original's capitalization."""
    phrases = sorted(dictionary, key=len, reverse=True)
    pattern = re.compile(r"(?<![\w'])(" + "|".join(re.escape(p) for p in phrases) + r")(?![\w'])", re.IGNORECASE)
    return pattern.sub(lambda m: _match_case(m.group(0), dictionary[m.group(0).lower()]), text)


# --------------------------------------------------------------------------- the seven perturbations


def punctuation_repetition(text: str, rng: random.Random, rate: float = 0.15) -> str:
    """Repeat sentence punctuation (2-4 extra marks) and stretch letters in some words ("sooo")."""
    text = re.sub(r"[.!?]", lambda m: m.group(0) * rng.randint(3, 5), text)
    words = list(re.finditer(r"[A-Za-z]{3,}", text))
    if not words:
        return text if re.search(r"[.!?]", text) else text + "!!!"
    chosen = [w for w in words if rng.random() < rate] or [rng.choice(words)]
    pieces, last = [], 0
    for word in chosen:
        position = word.start() + rng.randrange(len(word.group(0)))
        pieces += [text[last:position], text[position] * rng.randint(2, 4)]
        last = position + 1
    return "".join(pieces) + text[last:]


def greek_lookalikes(text: str, rng: random.Random, rate: float = 0.3) -> str:
    """Swap Latin letters for Greek look-alikes (the text looks the same, the code points do not)."""
    return _replace_chars(text, GREEK_LOOKALIKES, rng, rate)


def spelling_errors(text: str, rng: random.Random, rate: float = 0.2) -> str:
    """Swap, drop or double one letter in some words of 4+ letters."""
    words = list(re.finditer(r"[A-Za-z]{4,}", text))
    if not words:
        return text
    chosen = [w for w in words if rng.random() < rate] or [rng.choice(words)]
    pieces, last = [], 0
    for word in chosen:
        pieces += [text[last : word.start()], _misspell(word.group(0), rng)]
        last = word.end()
    return "".join(pieces) + text[last:]


def _misspell(word: str, rng: random.Random) -> str:
    swappable = [i for i in range(1, len(word) - 2) if word[i] != word[i + 1]]
    operation = rng.choice(["swap", "drop", "double"] if swappable else ["drop", "double"])
    if operation == "swap":
        i = rng.choice(swappable)
        return word[:i] + word[i + 1] + word[i] + word[i + 2 :]
    i = rng.randrange(1, len(word) - 1)  # keep the first and last letters, as typos usually do
    return word[:i] + word[i + 1 :] if operation == "drop" else word[:i] + word[i] + word[i:]


def leetspeak(text: str, rng: random.Random, rate: float = 0.5) -> str:
    """Replace letters by digits (a->4, e->3, o->0, ...)."""
    mapping = {**LEET, **{k.upper(): v for k, v in LEET.items()}}
    return _replace_chars(text, mapping, rng, rate)


def shortening(text: str, rng: random.Random | None = None) -> str:
    """Keep the first half of the sentences (rounded up); of one sentence, the first half of its words."""
    sentences = [s for s in re.split(r"(?<=[.!?])\s+", text.strip()) if s]
    if len(sentences) > 1:
        return " ".join(sentences[: math.ceil(len(sentences) / 2)])
    words = text.split()
    return " ".join(words[: math.ceil(len(words) / 2)]) if len(words) > 1 else text


def elevated_language(text: str, rng: random.Random | None = None) -> str:
    """Substitute formal words from :data:`ELEVATED_WORDS` (every occurrence)."""
    return _substitute(text, ELEVATED_WORDS)


def casual_language(text: str, rng: random.Random | None = None) -> str:
    """Substitute chat-style words from :data:`CASUAL_WORDS` (every occurrence)."""
    return _substitute(text, CASUAL_WORDS)


_FUNCTIONS: dict[str, Callable[..., str]] = {
    "punctuation_repetition": punctuation_repetition,
    "greek_lookalikes": greek_lookalikes,
    "spelling_errors": spelling_errors,
    "leetspeak": leetspeak,
    "shortening": shortening,
    "elevated_language": elevated_language,
    "casual_language": casual_language,
}


def perturb(text: str, kind: str, *, seed: int = 0) -> str:
    """Apply one perturbation of :data:`PERTURBATIONS` to ``text``.

    Examples
    --------
    >>> perturb("I am really sorry to hear that.", "casual_language")
    "I'm rly sry to hear that."
    >>> perturb("I am really sorry to hear that.", "shortening")
    'I am really sorry'
    """
    if kind not in _FUNCTIONS:
        raise ValueError(f"unknown perturbation {kind!r}; choose from {', '.join(PERTURBATIONS)}")
    return _FUNCTIONS[kind](text, _rng(seed, kind, text))


def perturb_all(texts: Sequence[str], *, seed: int = 0, kinds: Sequence[str] = PERTURBATIONS) -> pd.DataFrame:
    """Every perturbation of every text: ``text_index, perturbation, original, perturbed, changed``."""
    rows = [
        {"text_index": i, "perturbation": kind, "original": text, "perturbed": (new := perturb(text, kind, seed=seed)),
         "changed": new != text}
        for kind in kinds
        for i, text in enumerate(texts)
    ]
    return pd.DataFrame(rows, columns=["text_index", "perturbation", "original", "perturbed", "changed"])


# --------------------------------------------------------------------------- robustness


class Predicts(Protocol):
    def predict(self, texts: Sequence[str]) -> np.ndarray: ...


def robustness_table(predictor: Predicts, reference_texts: Sequence[str], *, seed: int = 0) -> pd.DataFrame:
    """How far each perturbation moves the predicted rating.

    Parameters
    ----------
    predictor : object with ``predict(texts) -> array``
        E.g. :class:`analysis.automatic_metrics.predictor.RatingPredictor`.
    reference_texts : sequence of str
        Texts to perturb (e.g. the reference responses).
    seed : int
        Seed of the random perturbations.

    Returns
    -------
    DataFrame
        One row per perturbation: ``perturbation, n, n_changed, mean_change,
        sd_change`` (ddof=1) and ``mean_abs_change``, where change = prediction
        on the perturbed text minus prediction on the original; texts a
        perturbation left unchanged count as 0.
    """
    texts = list(reference_texts)
    perturbed = perturb_all(texts, seed=seed)
    # One predict call for originals and all variants, so the encoder batches them together.
    predictions = np.asarray(predictor.predict(texts + perturbed["perturbed"].tolist()), dtype=float)
    original = predictions[: len(texts)]
    perturbed["change"] = predictions[len(texts) :] - original[perturbed["text_index"].to_numpy()]
    rows = [
        {
            "perturbation": kind,
            "n": len(group),
            "n_changed": int(group["changed"].sum()),
            "mean_change": group["change"].mean(),
            "sd_change": group["change"].std(ddof=1),
            "mean_abs_change": group["change"].abs().mean(),
        }
        for kind, group in perturbed.groupby("perturbation", sort=False)
    ]
    return pd.DataFrame(rows, columns=["perturbation", "n", "n_changed", "mean_change", "sd_change", "mean_abs_change"])
