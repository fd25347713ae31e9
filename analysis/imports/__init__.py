"""Importing answers and gold scores from other tools: validation (``importers``), the CSV column readers
(``csv_columns``, ``iso_times``) and the bulk writer (``import_writer``)."""
