"""`bioel refresh`: argument parsing for bioel_core.refresh."""

from __future__ import annotations

from bioel_core import progress
from pipelines.cli_flags import add_contracts
from pipelines.cli_verbs import FLAGS


def add_subcommands(subparsers) -> None:
    rf = subparsers.add_parser(
        "refresh",
        help="KB changed: re-encode only the changed names, rebuild only the touched index shards",
        description="Diffs two ingest-kb outputs of one KB by name_id, encodes the names that have no vector to carry "
        "over (in process: a KB release changes few names; when most changed, run embed and build-index "
        "instead), and writes a refreshed embeddings folder and index folder, equal to a full re-run, "
        "with a diff report (refresh_report.json in the new embeddings generation) and quality reports. The outputs are "
        "new folders: the inputs are never modified.",
    )
    add_contracts(rf, FLAGS["refresh"])
    rf.set_defaults(func=cmd_refresh)


def cmd_refresh(args) -> int:
    from bioel_core.refresh import REPORT_FILE, format_summary, refresh
    from bioel_core.settings import QualitySettings, RefreshSettings
    from bioel_core.tables import data_root
    from pipelines.cli_common import finish

    run = args.contracts.settings(args, RefreshSettings)
    quality = args.contracts.settings(args, QualitySettings)
    gates = (quality.gate(), quality.gate())  # one per output folder: a gate keeps the summary of its audit
    result = refresh(
        run.old,
        run.new,
        run.model,
        run.embeddings,
        run.index,
        run.output_embeddings,
        run.output_index,
        device=run.device,
        batch_size=run.batch_size,
        examples=run.examples,
        gates=gates,
        labels=args.contracts.options(),
    )
    done = result.report["refresh"]
    progress.count(
        names_encoded=done["encoded"], vectors_carried=done["carried"], index_shards_rebuilt=len(done["index_shards_rebuilt"])
    )
    print(format_summary(result.report))
    print(f"refreshed -> {run.output_embeddings}, {run.output_index}; report: {data_root(run.output_embeddings) / REPORT_FILE}")
    for gate in gates:
        finish(gate)
    return 0
