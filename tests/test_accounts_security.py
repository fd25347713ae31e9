"""Researcher accounts (issue 27, item 6): two-factor sign-in with TOTP, password rules, sessions
that end on a password change.

Codes are computed here from the secret the page shows with RFC 6238 written out (hmac,
SHA-1, 30 s steps, 6 digits), not with django-otp's own functions."""

from __future__ import annotations

import base64
import hashlib
import hmac
import struct
import time
from urllib.parse import parse_qs, urlparse

import pytest
from django.test import Client
from django_otp.plugins.otp_totp.models import TOTPDevice

from audit.models import AuditEvent
from tests.support.researcher import PASSWORD

NEW_PASSWORD = "a much longer passphrase 7"


def totp(secret_b32: str, *, at: float | None = None) -> str:
    key = base64.b32decode(secret_b32 + "=" * (-len(secret_b32) % 8))
    counter = int((time.time() if at is None else at) // 30)
    digest = hmac.new(key, struct.pack(">Q", counter), hashlib.sha1).digest()
    offset = digest[-1] & 0x0F
    return f"{(struct.unpack('>I', digest[offset:offset + 4])[0] & 0x7FFFFFFF) % 1_000_000:06d}"


def sign_in(client: Client, username: str = "owner", password: str = PASSWORD, code: str = ""):
    return client.post("/accounts/login/", {"username": username, "password": password, "otp_token": code})


def turn_on_two_factor(client: Client) -> str:
    page = client.get("/accounts/two-factor/")
    secret = page.context["secret"]
    url = urlparse(page.context["config_url"])
    assert url.scheme == "otpauth" and url.netloc == "totp"
    assert parse_qs(url.query)["secret"][0].rstrip("=") == secret  # the link and the typed key are one key
    assert client.post("/accounts/two-factor/", {"action": "confirm", "token": totp(secret)}).status_code == 302
    return secret


@pytest.fixture
def signed_in(client, owner, fresh_cache) -> Client:
    assert sign_in(client).status_code == 302
    return client


def test_with_two_factor_on_the_password_alone_no_longer_signs_in(signed_in, owner, settings):
    settings.OTP_TOTP_THROTTLE_FACTOR = 0  # each wrong code otherwise blocks the next try for 1, 2, 4... s
    secret = turn_on_two_factor(signed_in)
    assert TOTPDevice.objects.get(user=owner).confirmed
    for code in ("", "000000" if totp(secret) != "000000" else "111111"):
        response = sign_in(Client(), code=code)
        assert response.status_code == 200 and b"authenticator code did not match" in response.content
    fresh = Client()
    # The confirming code was spent (django-otp refuses a replay); the next step's code is accepted.
    assert sign_in(fresh, code=totp(secret)).status_code == 200
    assert sign_in(fresh, code=totp(secret, at=time.time() + 30)).status_code == 302
    assert fresh.get("/studies/").status_code == 200
    assert [e.action for e in AuditEvent.objects.filter(action__startswith="account.").order_by("id")] == [
        "account.sign_in", "account.two_factor_on", *["account.sign_in_failed"] * 3, "account.sign_in"]


def test_a_wrong_confirmation_code_leaves_two_factor_off(signed_in, owner):
    signed_in.get("/accounts/two-factor/")
    response = signed_in.post("/accounts/two-factor/", {"action": "confirm", "token": "12345x"})
    assert response.status_code == 400 and not TOTPDevice.objects.filter(confirmed=True).exists()
    assert sign_in(Client()).status_code == 302  # the password alone still signs in


def test_turning_it_off_needs_a_current_code(signed_in, settings):
    settings.OTP_TOTP_THROTTLE_FACTOR = 0  # a wrong code otherwise blocks the next try for a second
    secret = turn_on_two_factor(signed_in)
    assert signed_in.post("/accounts/two-factor/", {"action": "disable", "token": "abc"}).status_code == 400
    assert TOTPDevice.objects.filter(confirmed=True).exists()
    # The code used to confirm was spent (no replay): the next step's code turns it off.
    later = totp(secret, at=time.time() + 30)
    assert signed_in.post("/accounts/two-factor/", {"action": "disable", "token": later}).status_code == 302
    assert not TOTPDevice.objects.exists()


def test_when_required_a_researcher_without_it_must_set_it_up_first(signed_in, settings, study):
    settings.TWO_FACTOR_REQUIRED = True
    settings.OTP_TOTP_THROTTLE_FACTOR = 0  # the sign-in without a code must not delay the one with it
    response = signed_in.get(f"/studies/{study.slug}/")
    assert response.status_code == 302 and response["Location"].startswith("/accounts/two-factor/?next=")
    assert signed_in.get(f"/api/studies/{study.slug}/").status_code == 403
    assert signed_in.get("/s/tide/consent/").status_code == 200  # participant pages are not affected
    secret = turn_on_two_factor(signed_in)
    assert signed_in.get(f"/studies/{study.slug}/").status_code == 200
    # A new sign-in needs the code; with it, the session is verified.
    other = Client()
    assert sign_in(other).status_code == 200
    assert sign_in(other, code=totp(secret, at=time.time() + 30)).status_code == 302
    assert other.get(f"/studies/{study.slug}/").status_code == 200
    assert signed_in.post("/accounts/two-factor/", {"action": "disable", "token": totp(secret)}).status_code == 400


@pytest.mark.parametrize("new", ["short7", "password123", "owner@example.org"])
def test_a_weak_password_is_refused_by_django_s_validators_and_nothing_changes(signed_in, owner, new):
    response = signed_in.post("/accounts/password/", {"old_password": PASSWORD, "new_password1": new,
                                                      "new_password2": new})
    assert response.status_code == 200 and b"The password was not changed" in response.content
    owner.refresh_from_db()
    assert owner.check_password(PASSWORD)


def test_a_password_change_ends_every_other_session_but_this_one(signed_in, owner, study):
    elsewhere = Client()
    assert sign_in(elsewhere).status_code == 302
    assert elsewhere.get(f"/studies/{study.slug}/").status_code == 200
    response = signed_in.post("/accounts/password/", {"old_password": PASSWORD, "new_password1": NEW_PASSWORD,
                                                      "new_password2": NEW_PASSWORD})
    assert response.status_code == 302
    assert signed_in.get(f"/studies/{study.slug}/").status_code == 200
    cut = elsewhere.get(f"/studies/{study.slug}/")
    assert cut.status_code == 302 and cut["Location"].startswith("/accounts/login/")
    assert AuditEvent.objects.filter(action="account.password_change", actor="owner").count() == 1
