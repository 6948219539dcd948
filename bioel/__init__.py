"""`python -m bioel`: the `bioel` command (pipelines.cli) as a module, for environments without the console script."""
