"""Researcher sign-in, rate-limited against password guessing."""

from __future__ import annotations

from django.contrib.auth import views as auth_views
from django.core.cache import cache
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render

MAX_FAILURES = 10
WINDOW_SECONDS = 15 * 60


def _keys(request: HttpRequest) -> list[str]:
    ip = request.META.get("REMOTE_ADDR", "unknown")
    username = (request.POST.get("username") or "").strip().lower()[:150]
    return [f"login-fail:ip:{ip}", f"login-fail:user:{username}"]


def _too_many(request: HttpRequest) -> bool:
    return any((cache.get(key) or 0) >= MAX_FAILURES for key in _keys(request))


def _count_failure(request: HttpRequest) -> None:
    for key in _keys(request):
        if cache.add(key, 1, WINDOW_SECONDS) is False:
            try:
                cache.incr(key)
            except ValueError:  # expired between add and incr
                cache.set(key, 1, WINDOW_SECONDS)


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
