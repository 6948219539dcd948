"""`bioel refresh`: argument parsing for bioel_core.refresh."""

from __future__ import annotations

from bioel_core import progress


def add_subcommands(subparsers) -> None:
    rf = subparsers.add_parser(
        "refresh", help="KB changed: re-encode only the changed names, rebuild only the touched index shards",
        description="Diffs two ingest-kb outputs of one KB by name_id, encodes the names that have no vector to carry "
                    "over (in process: a KB release changes few names; when most changed, run embed and build-index "
                    "instead), and writes a refreshed embeddings folder and index folder, equal to a full re-run, "
                    "with a diff report (refresh_report.json in the new embeddings generation) and quality reports. The outputs are "
                    "new folders: the inputs are never modified.")
    rf.add_argument("--old", required=True, help="the ingest-kb output the embeddings were made from")
    rf.add_argument("--new", required=True, help="the ingest-kb output of the new KB version")
    rf.add_argument("--model", required=True, help="the model folder the embeddings were made with (fingerprint checked)")
    rf.add_argument("--embeddings", required=True, help="the embed output of --old")
    rf.add_argument("--index", required=True, help="the build-index output of --embeddings")
    rf.add_argument("--output-embeddings", required=True, help="folder for the refreshed embeddings (not an input)")
    rf.add_argument("--output-index", required=True, help="folder for the refreshed index (not an input)")
    rf.add_argument("--device", default="cpu", help="cpu or cuda[:N]")
    rf.add_argument("--batch-size", type=int, help="names per encoder call (default: the embeddings' own)")
    rf.add_argument("--examples", type=int, default=10, help="examples per section of the diff report (default 10)")
    rf.add_argument("--fail-on", choices=["critical", "warning", "none"], default="critical",
                    help="quality failures that make the command exit non-zero")
    rf.add_argument("--no-quality", action="store_true", help="skip the quality reports")
    rf.set_defaults(func=cmd_refresh)


def cmd_refresh(args) -> int:
    from bioel_core.refresh import REPORT_FILE, format_summary, refresh
    from bioel_core.tables import data_root
    from pipelines.cli_common import finish, quality_gate

    gates = (quality_gate(args), quality_gate(args))  # one per output folder: a gate keeps the summary of its audit
    result = refresh(args.old, args.new, args.model, args.embeddings, args.index, args.output_embeddings,
                     args.output_index, device=args.device, batch_size=args.batch_size, examples=args.examples,
                     gates=gates)
    done = result.report["refresh"]
    progress.count(names_encoded=done["encoded"], vectors_carried=done["carried"],
                   index_shards_rebuilt=len(done["index_shards_rebuilt"]))
    print(format_summary(result.report))
    print(f"refreshed -> {args.output_embeddings}, {args.output_index}; report: {data_root(args.output_embeddings) / REPORT_FILE}")
    for gate in gates:
        finish(gate)
    return 0
