"""bioel_core: the plain library behind the bioel pipelines (never imports Apache Beam).

In process: `bioel_core.Annotator.from_folders(indexes={"Disease": "out/index"})` links strings (`.link`) and
annotates documents (`.annotate`); see bioel_core.api and the README's "Python API".
"""

__version__ = "0.2.0"

import os

from bioel_core.lazy import lazy_exports

# torch's CPU matrix products are Intel MKL's, which may split a product's sum between threads, so one worker with
# two threads and two workers with one each could write scores a last bit apart (seen on AVX-512 CPUs). MKL's strict
# reproducible mode keeps every product's sum order whatever the thread count. MKL reads the variable at its first
# product: importing bioel_core sets it, before any model runs; a value set by the user is kept.
os.environ.setdefault("MKL_CBWR", "AUTO,STRICT")

# imported on first use: `import bioel_core` stays light (the pipelines import it for the version alone)
__getattr__ = lazy_exports("bioel_core", {"Annotator": "bioel_core.api"})


__all__ = ["Annotator", "__version__"]
