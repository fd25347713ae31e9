"""Researcher sign-in, rate-limited against password guessing.

Attempts are counted per account and per address with the shared atomic
counters of ``web.ratelimit``, *before* the password is checked: each attempt
takes a place in the window first, so of any burst of parallel attempts at most
``MAX_FAILURES`` reach the password check. An attempt that is refused, or whose
password is right, gives its place back: only failures stay counted.

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

from web.ratelimit import count, digest, hit, release
from web.two_factor import TwoFactorAuthenticationForm

MAX_FAILURES = 10
MAX_ADDRESS_FAILURES = 30
WINDOW_SECONDS = 15 * 60


def _username(request: HttpRequest) -> str:
    return (request.POST.get("username") or "").strip().lower()[:150]


def _address(request: HttpRequest) -> str:
    return request.META.get("REMOTE_ADDR", "unknown")


def _account_key(username: str) -> str:
    return f"login-fail:account:{digest(username)}"


def _address_key(address: str) -> str:
    return f"login-fail:address:{digest(address)}"


def _address_account_key(address: str, username: str) -> str:
    return f"login-fail:address-account:{digest(address + chr(0) + username)}"


def _attempt_keys(request: HttpRequest) -> tuple[str, str]:
    return _account_key(_username(request)), _address_key(_address(request))


def _attempt_allowed(request: HttpRequest) -> bool:
    """Count this attempt (account, then address); False, with the counts taken back, when over a limit.

    The address is counted only once the account let the attempt in: otherwise the places that a burst
    of refused attempts holds for a moment would push the address over its limit, and an attempt that
    the account had let in would be refused as spraying.
    """
    account_key, address_key = _attempt_keys(request)
    if hit(account_key, WINDOW_SECONDS) > MAX_FAILURES:
        release(account_key)
        return False
    spraying = (hit(address_key, WINDOW_SECONDS) > MAX_ADDRESS_FAILURES
                and count(_address_account_key(_address(request), _username(request))) > 0)
    if spraying:
        _give_back(request)
        return False
    return True


def _give_back(request: HttpRequest) -> None:
    for key in _attempt_keys(request):
        release(key)


class RateLimitedLoginView(auth_views.LoginView):
    template_name = "registration/login.html"
    redirect_authenticated_user = True
    authentication_form = TwoFactorAuthenticationForm

    def post(self, request: HttpRequest, *args, **kwargs) -> HttpResponse:
        if not _attempt_allowed(request):
            return render(request, "registration/locked.html", {"minutes": WINDOW_SECONDS // 60}, status=429)
        return super().post(request, *args, **kwargs)

    def form_valid(self, form) -> HttpResponse:
        _give_back(self.request)  # a right password is no failure
        return super().form_valid(form)

    def form_invalid(self, form) -> HttpResponse:
        # The attempt's account and address counts stay: they were this failure's.
        hit(_address_account_key(_address(self.request), _username(self.request)), WINDOW_SECONDS)
        return super().form_invalid(form)


class AdminLoginView(RateLimitedLoginView):
    """The admin's sign-in. A signed-in researcher who is not staff is told the admin is not for them:
    sending them on to ``next`` (the admin) would send them straight back here, for ever."""

    def dispatch(self, request: HttpRequest, *args, **kwargs) -> HttpResponse:
        if request.user.is_authenticated and not request.user.is_staff:
            return render(request, "registration/admin_not_staff.html", status=403)
        return super().dispatch(request, *args, **kwargs)
