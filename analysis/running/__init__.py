"""How an analysis run runs: its life from creation to the last table (``runs``), how it is split between
tasks and the frames its tasks share (``fanout``), and the frames it builds by name (``frame_builders``)."""
