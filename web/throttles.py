"""API throttles counted by the shared atomic counters of ``web.ratelimit``.

DRF's own throttles keep a list of timestamps in the cache and read it, then
write it back: parallel requests all read the same list and all pass. Here each
request takes its place with one atomic hit and passes only if that place is
within the rate, so a budget holds exactly under bursts. The window is fixed: it
starts at a user's first request and lasts the rate's period.
"""

from __future__ import annotations

from rest_framework import throttling

from . import ratelimit


class AtomicWindowThrottle(throttling.SimpleRateThrottle):
    """A ``SimpleRateThrottle`` (same rates and keys) whose counting is one atomic step."""

    def allow_request(self, request, view) -> bool:
        if self.rate is None:
            return True
        self.key = self.get_cache_key(request, view)
        if self.key is None:
            return True
        return ratelimit.hit(self.key, self.duration) <= self.num_requests

    def wait(self) -> float | None:
        return ratelimit.seconds_left(self.key) or None


class UserRateThrottle(AtomicWindowThrottle, throttling.UserRateThrottle):
    """DRF's per-user (or per-address when anonymous) rate, ``DEFAULT_THROTTLE_RATES["user"]``."""
