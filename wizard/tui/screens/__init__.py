"""The TUI's screens: one per step of the pipeline, plus modals."""
