from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.urls import include, path
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerSplitView

from web import account_views
from web.accounts import AdminLoginView, RateLimitedLoginView
from web.security import chart_page_csp
from web.views import favicon, healthz


urlpatterns = [
    path("healthz", healthz, name="healthz"),
    # Browsers ask for it on pages without an icon link (the admin, JSON, the API docs).
    path("favicon.ico", favicon, name="favicon"),
    path("admin/login/", AdminLoginView.as_view(), name="admin-login"),
    path("admin/", admin.site.urls),
    path("accounts/login/", RateLimitedLoginView.as_view(), name="login"),
    path("accounts/logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("accounts/password/", account_views.PasswordChange.as_view(), name="password_change"),
    path("accounts/two-factor/", account_views.two_factor, name="two_factor"),
    path("api/schema/", SpectacularAPIView.as_view(), name="api-schema"),
    # The split view serves Swagger UI's start-up script as a file (our CSP forbids inline
    # scripts); Swagger UI positions elements with inline styles, as plotly does.
    path("api/docs/", chart_page_csp(SpectacularSwaggerSplitView.as_view(
        url_name="api-schema", template_name="api/swagger_ui.html")), name="api-docs"),
    path("api/", include("config.api_urls")),
    path("", include("analysis.urls")),
    path("", include("audit.urls")),
    path("", include("prolific.urls")),
    path("", include("judges.urls")),
    path("", include("surveys.urls")),
]

# Each answers JSON {"detail": ...} under /api/ and the HTML page elsewhere.
handler400 = "web.errors.bad_request"
handler403 = "web.errors.permission_denied"
handler404 = "web.errors.page_not_found"
handler500 = "web.errors.server_error"
