"""bioel_core: the plain library behind the bioel pipelines (never imports Apache Beam).

In process: `bioel_core.Annotator.from_folders(indexes={"Disease": "out/index"})` links strings (`.link`) and
annotates documents (`.annotate`); see bioel_core.api and the README's "Python API".
"""

__version__ = "0.2.0"


from bioel_core.lazy import lazy_exports

# imported on first use: `import bioel_core` stays light (the pipelines import it for the version alone)
__getattr__ = lazy_exports("bioel_core", {"Annotator": "bioel_core.api"})


__all__ = ["Annotator", "__version__"]
