"""What researchers download: the CSV exports of a run (``exports``), the codebook of every column
(``codebook``) and the README of the "everything for the paper" zip (``zip_readme``)."""
