"""bioel_core: the plain library behind the bioel pipelines (never imports Apache Beam).

In process: `bioel_core.Annotator.from_folders(indexes={"Disease": "out/index"})` links strings (`.link`) and
annotates documents (`.annotate`); see bioel_core.api and the README's "Python API".
"""

__version__ = "0.1.0"


def __getattr__(name: str):
    # imported on first use: `import bioel_core` stays light (the pipelines import it for the version alone)
    if name == "Annotator":
        from bioel_core.api import Annotator

        return Annotator
    raise AttributeError(f"module 'bioel_core' has no attribute {name!r}")


__all__ = ["Annotator", "__version__"]
