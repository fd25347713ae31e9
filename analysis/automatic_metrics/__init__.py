"""The optional automatic-metrics stack (requirements-metrics.txt): the metrics themselves (``metrics``), their
bootstrap (``metrics_bootstrap``), the metrics run (``metrics_run``, registered as a kind of run), the predictor
of human ratings (``predictor``), the perturbation checks (``perturb``), the embedding cache and the API."""
