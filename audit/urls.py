from django.urls import path

from . import views

app_name = "audit"
urlpatterns = [
    path("studies/<slug:slug>/audit/", views.audit_page, name="page"),
    path("studies/<slug:slug>/audit.csv", views.audit_csv, name="csv"),
]
