from django.urls import path

from . import views

app_name = "judges"
urlpatterns = [
    path("studies/<slug:slug>/judges/", views.judges_page, name="page"),
    path("studies/<slug:slug>/judges/run/", views.judge_run_start, name="run_start"),
]
