"""Two-factor sign-in with TOTP (django-otp): optional per account, required for every researcher
when ``settings.TWO_FACTOR_REQUIRED`` is on.

An account with a confirmed TOTP device must give its 6-digit code with the password; the
session is then marked verified (django_otp's ``otp_device_id``). With the setting on, a
signed-in researcher whose session is not verified reaches only the sign-out, the two-factor
set-up page and the public pages until they set up an app and confirm a code.
"""

from __future__ import annotations

from collections.abc import Callable

from django import forms
from django.conf import settings
from django.contrib.auth.forms import AuthenticationForm
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import redirect
from django.utils.http import urlencode
from django_otp import match_token, user_has_device

from web.signals import announce_action


class TwoFactorAuthenticationForm(AuthenticationForm):
    """Password, then the authenticator code when the account has a confirmed device."""

    otp_token = forms.CharField(required=False, max_length=8, label="Authenticator code",
                                widget=forms.TextInput(attrs={"autocomplete": "one-time-code", "inputmode": "numeric"}))

    def clean(self):
        cleaned = super().clean()
        user = self.get_user()
        if user is not None and user_has_device(user):
            device = match_token(user, (cleaned.get("otp_token") or "").strip())
            if device is None:
                announce_action(actor=None, study=None, action="account.sign_in_failed", object=user.get_username(),
                                detail="wrong or missing two-factor code", request=self.request)
                raise forms.ValidationError("Enter the current code from your authenticator app.", code="otp")
            user.otp_device = device  # django_otp marks the session verified on sign-in
        return cleaned


#: Paths an unverified researcher still reaches when two-factor is required (prefixes).
OPEN_PATHS = ("/accounts/", "/static/", "/s/", "/healthz", "/favicon.ico", "/api/schema/", "/api/docs/")


class RequireTwoFactorMiddleware:
    """With ``TWO_FACTOR_REQUIRED``, a session-signed-in researcher without a verified second factor is
    sent to set one up (API: 403). Token clients of the API are not affected: a token is its own credential."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]):
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        if settings.TWO_FACTOR_REQUIRED and self._blocked(request):
            if request.path.startswith("/api/"):
                return JsonResponse({"detail": "Two-factor sign-in is required: set it up at /accounts/two-factor/."},
                                    status=403)
            return redirect(f"/accounts/two-factor/?{urlencode({'next': request.get_full_path()})}")
        return self.get_response(request)

    @staticmethod
    def _blocked(request: HttpRequest) -> bool:
        user = request.user
        return (user.is_authenticated and not user.is_verified()
                and not any(request.path.startswith(prefix) for prefix in OPEN_PATHS))
