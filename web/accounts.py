"""Researcher sign-in, rate-limited against password guessing.

Failures are counted per account and per address, in the default cache, which
every worker shares (``web.ratelimit``).

- An account with ``MAX_FAILURES`` failures in the window is locked, whatever
  the address: this stops guessing one password.
- An address with ``MAX_ADDRESS_FAILURES`` failures in the window (password
  spraying over many accounts) is refused only for the accounts it has already
  failed on: failures against one account never lock out another, so a real
  researcher behind the same proxy address signs in as usual.
"""

from __future__ import annotations

from django.contrib.auth import views as auth_views
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render

from web.ratelimit import count, digest, increment

MAX_FAILURES = 10
MAX_ADDRESS_FAILURES = 30
WINDOW_SECONDS = 15 * 60


def _username(request: HttpRequest) -> str:
    return (request.POST.get("username") or "").strip().lower()[:150]


def _account_key(username: str) -> str:
    return f"login-fail:account:{digest(username)}"


def _address_key(address: str) -> str:
    return f"login-fail:address:{digest(address)}"


def _address_account_key(address: str, username: str) -> str:
    return f"login-fail:address-account:{digest(address + chr(0) + username)}"


def _too_many(request: HttpRequest) -> bool:
    username, address = _username(request), request.META.get("REMOTE_ADDR", "unknown")
    if count(_account_key(username)) >= MAX_FAILURES:
        return True
    spraying = count(_address_key(address)) >= MAX_ADDRESS_FAILURES
    return spraying and count(_address_account_key(address, username)) > 0


def _count_failure(request: HttpRequest) -> None:
    username, address = _username(request), request.META.get("REMOTE_ADDR", "unknown")
    for key in (_account_key(username), _address_key(address), _address_account_key(address, username)):
        increment(key, WINDOW_SECONDS)


class RateLimitedLoginView(auth_views.LoginView):
    template_name = "registration/login.html"
    redirect_authenticated_user = True

    def post(self, request: HttpRequest, *args, **kwargs) -> HttpResponse:
        if _too_many(request):
            return render(request, "registration/locked.html", {"minutes": WINDOW_SECONDS // 60}, status=429)
        return super().post(request, *args, **kwargs)

    def form_invalid(self, form) -> HttpResponse:
        _count_failure(self.request)
        return super().form_invalid(form)


class AdminLoginView(RateLimitedLoginView):
    """The admin's sign-in. A signed-in researcher who is not staff is told the admin is not for them:
    sending them on to ``next`` (the admin) would send them straight back here, for ever."""

    def dispatch(self, request: HttpRequest, *args, **kwargs) -> HttpResponse:
        if request.user.is_authenticated and not request.user.is_staff:
            return render(request, "registration/admin_not_staff.html", status=403)
        return super().dispatch(request, *args, **kwargs)
