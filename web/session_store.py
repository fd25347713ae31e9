"""Django's database sessions, with the session read by a prepared statement.

Every participant request reads its session first; Django's ``SessionStore`` builds that query in the ORM
each time (``Session.objects.get(...)``), which cost more CPU than running it: in a profile of the
production stack under load, about 7% of a gunicorn worker's CPU went to reading sessions, most of it
building the SQL (issue 31). Here the same query is compiled once per process (``web.prepared_queries``);
everything else (writes, keys, expiry, the cookie) is Django's own.
"""

from __future__ import annotations

from datetime import datetime

from django.contrib.sessions.backends.db import SessionStore as DatabaseSessionStore
from django.contrib.sessions.models import Session
from django.utils import timezone

from web.prepared_queries import PreparedQuery

# The live session of a key: what Django's store reads (``session_key=..., expire_date__gt=now``).
_live_session = PreparedQuery(
    lambda session_key, now: Session.objects.filter(session_key=session_key, expire_date__gt=now),
    session_key=str,
    now=datetime,
)


class SessionStore(DatabaseSessionStore):
    """``SESSION_ENGINE = "web.session_store"``."""

    def _get_session_from_db(self) -> Session | None:
        found = _live_session.run(session_key=self.session_key, now=timezone.now())
        if found:
            return found[0]
        self._session_key = None  # as Django's: a missing or expired session starts a new key
        return None
