from django.urls import path

from surveys import api as survey_api

urlpatterns = [
    path("studies/", survey_api.StudyList.as_view(), name="api-study-list"),
    path("studies/load/", survey_api.StudyLoad.as_view(), name="api-study-load"),
    path("studies/<slug:slug>/", survey_api.StudyDetail.as_view(), name="api-study-detail"),
    path("studies/<slug:slug>/participants/", survey_api.ParticipantList.as_view(), name="api-participants"),
    path("studies/<slug:slug>/ratings/", survey_api.RatingList.as_view(), name="api-ratings"),
]
