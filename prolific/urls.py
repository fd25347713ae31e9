from django.urls import path

from . import views

app_name = "prolific"
urlpatterns = [
    path("studies/<slug:slug>/prolific/", views.panel_page, name="panel"),
    path("studies/<slug:slug>/prolific/create/", views.panel_create, name="create"),
    path("studies/<slug:slug>/prolific/review/", views.review_page, name="review"),
    path("studies/<slug:slug>/prolific/bonuses/", views.bonuses_page, name="bonuses"),
    path("studies/<slug:slug>/prolific/<str:action>/", views.panel_action, name="action"),
]
