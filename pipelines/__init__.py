"""Apache Beam pipelines and the `bioel` command: thin wiring around bioel_core."""
