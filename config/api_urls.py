from django.urls import path

from analysis import api as analysis_api
from analysis import ratings_api
from analysis.automatic_metrics import metrics_api
from audit import api as audit_api
from judges import api as judges_api
from surveys import api as survey_api

urlpatterns = [
    path("studies/", survey_api.StudyList.as_view(), name="api-study-list"),
    path("studies/load/", survey_api.StudyLoad.as_view(), name="api-study-load"),
    path("studies/<slug:slug>/", survey_api.StudyDetail.as_view(), name="api-study-detail"),
    path("studies/<slug:slug>/participants/", survey_api.ParticipantList.as_view(), name="api-participants"),
    path("studies/<slug:slug>/ratings/", ratings_api.RatingList.as_view(), name="api-ratings"),
    # Analysis runs: POST starts one (202), then poll its status URL.
    path("studies/<slug:slug>/runs/", analysis_api.RunList.as_view(), name="api-runs"),
    path("studies/<slug:slug>/runs/<int:run_id>/", analysis_api.RunDetail.as_view(), name="api-study-run-detail"),
    path("runs/<int:run_id>/", analysis_api.RunDetail.as_view(), name="api-run-detail"),
    path("studies/<slug:slug>/runs/<int:run_id>/tables/", analysis_api.RunTableList.as_view(), name="api-run-tables"),
    path("studies/<slug:slug>/runs/<int:run_id>/tables/<str:name>/", analysis_api.RunTableDetail.as_view(),
         name="api-run-table"),
    path("studies/<slug:slug>/coverage/", analysis_api.Coverage.as_view(), name="api-coverage"),
    # Pseudonymous exports of the latest finished run; panel ids only from the restricted endpoint.
    path("studies/<slug:slug>/exports/", analysis_api.ExportList.as_view(), name="api-exports"),
    path("studies/<slug:slug>/exports/free-text/", analysis_api.FreeTextRecords.as_view(), name="api-free-text"),
    path("studies/<slug:slug>/exports/choices/", analysis_api.ChoiceRecords.as_view(), name="api-choices"),
    path("studies/<slug:slug>/exports/pairwise/", analysis_api.PairwiseRecords.as_view(), name="api-pairwise"),
    path("studies/<slug:slug>/exports/<str:name>.csv", analysis_api.ExportDownload.as_view(), name="api-export"),
    path("studies/<slug:slug>/restricted/identifiers.csv", analysis_api.IdentifiersDownload.as_view(),
         name="api-identifiers"),
    path("studies/<slug:slug>/imports/responses/", analysis_api.ResponsesImport.as_view(), name="api-import-responses"),
    path("studies/<slug:slug>/imports/gold/", analysis_api.GoldImport.as_view(), name="api-import-gold"),
    path("studies/<slug:slug>/imports/judgements/", judges_api.JudgementsImport.as_view(),
         name="api-import-judgements"),
    path("studies/<slug:slug>/judges/", judges_api.JudgeList.as_view(), name="api-judges"),
    path("studies/<slug:slug>/judges/agreement/", judges_api.JudgeAgreement.as_view(), name="api-judge-agreement"),
    path("studies/<slug:slug>/metrics/", metrics_api.MetricsRuns.as_view(), name="api-metrics-runs"),
    path("studies/<slug:slug>/predict/", metrics_api.Predict.as_view(), name="api-predict"),
    path("studies/<slug:slug>/audit/", audit_api.AuditEventList.as_view(), name="api-audit"),
]
