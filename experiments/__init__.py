"""The experiment harness, one package: run every entry point from the
repository root as a module, `python3 -m experiments.NAME` (experiments/README.md).
experiments.lib holds what the entry points share; nothing here edits sys.path."""
