"""The names of an output folder's files and of the verbs that write them: what the layout, the rules and the
readers agree on. No imports, so the CLI's light paths (the input-vs-output checks) use them without pyarrow."""

MANIFEST = "manifest.json"
STATS_FILE = "_stats.json"  # the job's counters, written by the pipeline into its generation folder
QUALITY = "quality"
REJECTED = "rejected"
REPORT_SUMMARY = "summary.json"  # a quality report's files (bioel_core.quality.report), in QUALITY or REJECTED
REPORT_HTML = "report.html"
REPORT_FILES = (REPORT_SUMMARY, REPORT_HTML)
VERBS = ("ingest-kb", "embed", "build-index", "link", "build")  # a manifest's `pipeline`: the verb that wrote the folder
