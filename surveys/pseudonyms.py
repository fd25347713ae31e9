"""Pseudonymous participant ids: exports never carry the panel's id."""

import hashlib
import hmac


def pseudonym_for(*, key: str, external_id: str) -> str:
    digest = hmac.new(key.encode(), external_id.encode(), hashlib.sha256).hexdigest()
    return f"p_{digest[:20]}"
