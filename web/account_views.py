"""A researcher's own account: change the password (Django's validators; every other session of the
account ends) and set up or turn off two-factor sign-in."""

from __future__ import annotations

import base64

import django_otp
from django.conf import settings
from django.contrib.auth import views as auth_views
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse_lazy
from django.utils.http import url_has_allowed_host_and_scheme
from django_otp.plugins.otp_totp.models import TOTPDevice

from web.signals import announce_action


class PasswordChange(auth_views.PasswordChangeView):
    """Django's view: the form checks AUTH_PASSWORD_VALIDATORS, and ``update_session_auth_hash`` keeps this
    session only. Every other session of the account holds the old password's hash, so Django's
    session check signs them out on their next request."""

    template_name = "registration/password_change.html"
    success_url = reverse_lazy("researcher:study_list")

    def form_valid(self, form) -> HttpResponse:
        response = super().form_valid(form)
        announce_action(actor=self.request.user, study=None, action="account.password_change",
                        object=self.request.user.get_username(), request=self.request)
        return response


def _secret(device: TOTPDevice) -> str:
    """The key as authenticator apps take it typed in: base32, no padding."""
    return base64.b32encode(device.bin_key).decode().rstrip("=")


def _next(request: HttpRequest) -> str:
    wanted = request.POST.get("next") or request.GET.get("next") or ""
    ok = url_has_allowed_host_and_scheme(wanted, allowed_hosts={request.get_host()}, require_https=request.is_secure())
    return wanted if ok and wanted else str(reverse_lazy("researcher:study_list"))


@login_required
def two_factor(request: HttpRequest) -> HttpResponse:
    """GET: the state, and for an account without a device a new key (otpauth:// URL and secret) to add to an
    app. POST confirm: a code from the app confirms the key. POST disable: a current code turns it off."""
    user = request.user
    confirmed = TOTPDevice.objects.filter(user=user, confirmed=True).first()
    context = {"confirmed": confirmed is not None, "required": settings.TWO_FACTOR_REQUIRED, "next": _next(request)}
    status = 200
    action, token = request.POST.get("action"), (request.POST.get("token") or "").strip()
    if request.method == "POST" and action == "confirm" and confirmed is None:
        pending = TOTPDevice.objects.filter(user=user, confirmed=False).first()
        if pending is not None and token and pending.verify_token(token):
            pending.confirmed = True
            pending.save(update_fields=["confirmed"])
            django_otp.login(request, pending)
            announce_action(actor=user, study=None, action="account.two_factor_on", object=user.get_username(),
                            request=request)
            return redirect(context["next"])
        context["error"], status = "That code did not match. Enter the code your app shows now.", 400
    elif request.method == "POST" and action == "disable" and confirmed is not None:
        if settings.TWO_FACTOR_REQUIRED:
            context["error"], status = "Two-factor sign-in is required on this site; it cannot be turned off.", 400
        elif django_otp.match_token(user, token) is None:
            context["error"], status = "That code did not match; two-factor sign-in stays on.", 400
        else:
            TOTPDevice.objects.filter(user=user).delete()
            announce_action(actor=user, study=None, action="account.two_factor_off", object=user.get_username(),
                            request=request)
            return redirect("two_factor")
    elif request.method == "POST":
        context["error"], status = "Nothing to do: reload the page.", 400
    if confirmed is None:
        pending, _ = TOTPDevice.objects.get_or_create(user=user, confirmed=False, defaults={"name": "authenticator"})
        context.update(config_url=pending.config_url, secret=_secret(pending))
    return render(request, "registration/two_factor.html", context, status=status)
