from django.urls import path

from . import preview_views, views, withdrawal_views

app_name = "surveys"
urlpatterns = [
    path("", views.home, name="home"),
    path("s/<slug:slug>/", views.entry, name="entry"),
    path("s/<slug:slug>/preview/", preview_views.preview_start, name="preview"),
    path("s/<slug:slug>/preview/<str:step>/", preview_views.preview_step, name="preview_step"),
    path("s/<slug:slug>/consent/", views.consent, name="consent"),
    path("s/<slug:slug>/instructions/", views.instructions, name="instructions"),
    path("s/<slug:slug>/page/", views.page, name="page"),
    path("s/<slug:slug>/page/draft/", views.page_draft, name="page_draft"),
    path("s/<slug:slug>/about-you/", views.demographics, name="demographics"),
    path("s/<slug:slug>/about-you/draft/", views.demographics_draft, name="demographics_draft"),
    path("s/<slug:slug>/done/", views.done, name="done"),
    path("s/<slug:slug>/exit/", views.exit_study, name="exit"),
    path("s/<slug:slug>/left/", views.left, name="left"),
    path("s/<slug:slug>/withdraw/", withdrawal_views.withdraw, name="withdraw"),
    path("s/<slug:slug>/withdrawn/", withdrawal_views.withdrawn, name="withdrawn"),
    path("s/<slug:slug>/notice/<str:kind>/", views.notice, name="notice"),
]
