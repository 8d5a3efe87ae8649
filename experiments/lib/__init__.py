"""Shared pieces of the experiment harness: statistics, provenance, the
regime classifier and the pipeline model. Pure Python (no numpy), so the
report and its tests run anywhere /usr/bin/python3 does."""
