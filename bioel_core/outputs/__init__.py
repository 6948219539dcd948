"""The output layer: how every verb (and `bioel refresh`) lays out, writes, describes, reads, versions and publishes an
output folder, and the rules every output folder obeys. Beam-free: pipelines pass an adapter over Beam's
FileSystems, refresh the local filesystem.

    names     file and folder names, the verbs          errors    why a folder is not published or not readable
    layout    shard names, Parquet and JSON writing     manifest  the Manifest envelope, content versions
    details   each verb's own manifest fields, typed    reading   a finished output's manifest, its data root
    versions  a folder's version, unchanged-source      rules     output-vs-input refusals, no-rows refusal
    lock, publish, runs: the folder lock, publishing a generation, sorted spill runs

Names are imported on first use (as bioel_core.index's): the CLI's light paths read `rules` without pyarrow.
"""

from bioel_core.lazy import lazy_exports

_EXPORTS = {
    **dict.fromkeys(["LOCAL", "FileSystem", "LocalFileSystem", "absolute", "as_path", "is_local"], "bioel_core.outputs.fs"),
    **dict.fromkeys(["MANIFEST", "QUALITY", "STATS_FILE", "VERBS"], "bioel_core.outputs.names"),
    **dict.fromkeys(
        [
            "check_num_shards",
            "embeddings_table",
            "name_chunks",
            "parquet_bytes",
            "parquet_rows",
            "read_json",
            "shard_name",
            "write_json",
            "write_parquet",
        ],
        "bioel_core.outputs.layout",
    ),
    **dict.fromkeys(["LOCK", "ConcurrentRunError", "OutputError"], "bioel_core.outputs.lock"),
    **dict.fromkeys(["Manifest", "content_sha256", "utc_now"], "bioel_core.outputs.manifest"),
    **dict.fromkeys(["FAULT_ENV", "STEPS", "OutputFolder", "read_pointer"], "bioel_core.outputs.publish"),
    **dict.fromkeys(
        ["EmptyOutputError", "IncompleteOutputError", "QualityGateError", "UnpublishedError", "UnreconciledError"],
        "bioel_core.outputs.errors",
    ),
    **dict.fromkeys(
        ["data_root", "json_object", "read_json_object", "read_manifest", "read_output_manifest"], "bioel_core.outputs.reading"
    ),
    **dict.fromkeys(["check_unchanged_source", "is_version_of", "manifest_sha256"], "bioel_core.outputs.versions"),
    **dict.fromkeys(
        ["check_model_output", "check_not_an_input", "check_not_empty", "check_output_folder", "refuse_empty"],
        "bioel_core.outputs.rules",
    ),
}
__getattr__ = lazy_exports(__name__, _EXPORTS)
__all__ = sorted(_EXPORTS)
