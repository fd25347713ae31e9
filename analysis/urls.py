from django.urls import path

from . import free_text_views, launch_views, new_study_views, rater_link_views, team_views, views, withdrawal_views

app_name = "researcher"
urlpatterns = [
    path("studies/", views.study_list, name="study_list"),
    path("new-study/", new_study_views.new_study, name="new_study"),
    path("studies/<slug:slug>/", views.dashboard, name="dashboard"),
    path("studies/<slug:slug>/dashboard.json", views.dashboard_data, name="dashboard_data"),
    path("studies/<slug:slug>/runs/", views.run_start, name="run_start"),
    path("studies/<slug:slug>/runs/<int:run_id>.json", views.run_status, name="run_status"),
    path("studies/<slug:slug>/runs/<int:run_id>/", views.results, name="results"),
    path("studies/<slug:slug>/runs/<int:run_id>/tables/<str:name>.csv", views.table_csv, name="table_csv"),
    path("studies/<slug:slug>/runs/<int:run_id>/figures/<str:key>.csv", views.figure_csv, name="figure_csv"),
    path("studies/<slug:slug>/metrics/", views.metrics_page, name="metrics"),
    path("studies/<slug:slug>/metrics/run/", views.metrics_start, name="metrics_start"),
    path("studies/<slug:slug>/metrics/predict/", views.metrics_predict, name="metrics_predict"),
    path("studies/<slug:slug>/metrics/<int:run_id>/tables/<str:name>.csv", views.metrics_table_csv,
         name="metrics_table_csv"),
    path("studies/<slug:slug>/import/", views.import_data, name="import"),
    path("studies/<slug:slug>/launch/", launch_views.launch_page, name="launch"),
    path("studies/<slug:slug>/team/", team_views.team_page, name="team"),
    path("studies/<slug:slug>/raters/", rater_link_views.rater_links_page, name="raters"),
    path("studies/<slug:slug>/raters/<int:link_id>/revoke/", rater_link_views.rater_link_revoke, name="rater_revoke"),
    path("studies/<slug:slug>/participants/delete/", withdrawal_views.participant_delete_page,
         name="participant_delete"),
    path("studies/<slug:slug>/exports/", views.export_list, name="exports"),
    path("studies/<slug:slug>/free-text/", free_text_views.free_text_answers, name="free_text"),
    path("studies/<slug:slug>/coverage.csv", views.coverage_csv, name="coverage_csv"),
    path("studies/<slug:slug>/exports/everything.zip", views.export_everything, name="export_everything"),
    path("studies/<slug:slug>/exports/<str:name>.csv", views.export_download, name="export_download"),
]
