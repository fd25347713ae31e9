from django.urls import path

from analysis import api as analysis_api
from surveys import api as survey_api

urlpatterns = [
    path("studies/", survey_api.StudyList.as_view(), name="api-study-list"),
    path("studies/load/", survey_api.StudyLoad.as_view(), name="api-study-load"),
    path("studies/<slug:slug>/", survey_api.StudyDetail.as_view(), name="api-study-detail"),
    path("studies/<slug:slug>/participants/", survey_api.ParticipantList.as_view(), name="api-participants"),
    path("studies/<slug:slug>/ratings/", survey_api.RatingList.as_view(), name="api-ratings"),
    path("studies/<slug:slug>/metrics/", analysis_api.MetricsRuns.as_view(), name="api-metrics-runs"),
    path("studies/<slug:slug>/predict/", analysis_api.Predict.as_view(), name="api-predict"),
]
