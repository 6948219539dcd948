"""bioel_core: the plain library behind the bioel pipelines (never imports Apache Beam)."""

__version__ = "0.1.0"
