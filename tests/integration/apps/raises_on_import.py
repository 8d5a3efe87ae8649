"""A module that raises while being imported (for the CLI error tests)."""
raise RuntimeError("boom-on-import")
