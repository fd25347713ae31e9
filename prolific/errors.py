"""Refusals of ours in the Prolific round trip (``ProlificError``, in ``client``, is Prolific's)."""


class PanelRefused(ValueError):
    """Our side refuses (the message says why); nothing was sent to Prolific."""
