"""KB readers, one module per format, looked up by the format name (IngestSettings.format)."""

from __future__ import annotations

import importlib

from bioel_core.kb.base import KBItem, KBReader

# kb name -> "module:class"; imported on demand so one format's optional needs never break another
READERS = {
    "umls": "bioel_core.kb.umls:UmlsReader",
    "ctd-diseases": "bioel_core.kb.ctd:CtdDiseasesReader",
    "ctd-chemicals": "bioel_core.kb.ctd:CtdChemicalsReader",
    "snomed": "bioel_core.kb.snomed:SnomedReader",
    "mesh-xml": "bioel_core.kb.mesh_xml:MeshXmlReader",
    "mesh-tsv": "bioel_core.kb.mesh_tsv:MeshTsvReader",
    "biosyn-dict": "bioel_core.kb.biosyn:BioSynDictionaryReader",
    "medic-biosyn": "bioel_core.kb.biosyn:MedicBioSynReader",
}


def get_reader(kind: str, **options) -> KBReader:
    if kind not in READERS:
        raise ValueError(f"unknown KB format {kind!r}; choose one of {sorted(READERS)}")
    module, cls = READERS[kind].split(":")
    return getattr(importlib.import_module(module), cls)(**options)


__all__ = ["READERS", "KBItem", "KBReader", "get_reader"]
