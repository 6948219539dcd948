"""A publishing run killed (SIGKILL) at every step of the publish sequence leaves the previous state intact or
the new one complete, and the run that follows ends equal to an uninterrupted run: for `ingest-kb`, `embed`,
`build-index` and `link --incremental`, through the CLI in a child process. The kills come from the output
layer's fault hooks (BIOEL_FAULT_AT=<step>), not from timing luck."""

import signal
from pathlib import Path

import pytest

from bioel_core.corpora import read_pubtator, write_pubtator
from bioel_core.index import IndexSpec
from bioel_core.models import TransformerEncoder
from bioel_core.outputs import LOCK, STEPS
from conftest import SAMPLE_DATA, assert_published, run_cli_child, table_bytes
from pipelines import build_index, embed_names, ingest_kb
from pipelines.options import pipeline_options
from test_models import make_tiny_bert

# steps before the pointer moves must leave the previous state; from there on the new one
BEFORE_POINTER = {"locked", "recovered", "built", "pointer_staged"}


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    """Two versions of every input: a previous (smaller) one and a new one, and the tiny model."""
    root = tmp_path_factory.mktemp("kills")
    lines = (SAMPLE_DATA / "medic_sample.txt").read_text().splitlines(keepends=True)
    (root / "medic-old.txt").write_text("".join(lines[: len(lines) // 2]))
    (root / "medic-new.txt").write_text("".join(lines))
    model = str(TransformerEncoder(make_tiny_bert(root / "bert"), pooling="mean").save(root / "model"))
    for version in ("old", "new"):
        ingest_kb.run(
            "medic-biosyn", [str(root / f"medic-{version}.txt")], str(root / f"kb-{version}"), pipeline_options([]), num_shards=2
        )
        embed_names.run(model, str(root / f"kb-{version}"), str(root / f"emb-{version}"), pipeline_options([]), num_shards=2)
        build_index.run(
            str(root / f"emb-{version}"),
            str(root / f"index-{version}"),
            pipeline_options([]),
            num_shards=2,
            spec=IndexSpec("flat"),
        )
    docs = read_pubtator(SAMPLE_DATA / "gold_ncbi_bc5cdr_sample.pubtator")
    with open(root / "docs-old.pubtator", "w") as fh:
        write_pubtator(docs[:20], fh)
    with open(root / "docs-new.pubtator", "w") as fh:
        write_pubtator(docs, fh)
    return root, model


def commands(root: Path, model: str, out: Path) -> dict[str, tuple[list[str], list[str]]]:
    """verb -> (the command that makes the previous state, the command that makes the new one)."""
    # not --incremental: run again on the state it published, an incremental run finds nothing changed and publishes
    # nothing (tests/test_link_incremental.py), where this test needs each run to reach every publish step
    link = [
        "link",
        "--model",
        model,
        "--index",
        f"Disease={root / 'index-new'}",
        "--input-format",
        "pubtator",
        "--output",
        str(out),
        "--no-quality",
        "--input",
    ]
    return {
        "ingest-kb": tuple(
            [
                "ingest-kb",
                "--input-format",
                "medic-biosyn",
                "--input",
                str(root / f"medic-{v}.txt"),
                "--output",
                str(out),
                "--num-shards",
                "2",
                "--no-quality",
            ]
            for v in ("old", "new")
        ),
        "embed": tuple(
            [
                "embed",
                "--model",
                model,
                "--input",
                str(root / f"kb-{v}"),
                "--output",
                str(out),
                "--num-shards",
                "2",
                "--no-quality",
            ]
            for v in ("old", "new")
        ),
        "build-index": tuple(
            [
                "build-index",
                "--input",
                str(root / f"emb-{v}"),
                "--output",
                str(out),
                "--num-shards",
                "2",
                "--index-kind",
                "flat",
                "--no-quality",
            ]
            for v in ("old", "new")
        ),
        "link": tuple(link + [str(root / f"docs-{v}.pubtator")] for v in ("old", "new")),
    }


# embed and build-index publish through the same OutputFolder as ingest-kb and link: their cases run in
# `make test-all` (slow), keeping `make test` near 20 minutes on 2 cores
@pytest.mark.parametrize(
    "verb",
    ["ingest-kb", pytest.param("embed", marks=pytest.mark.slow), pytest.param("build-index", marks=pytest.mark.slow), "link"],
)
def test_a_kill_at_every_publish_step_keeps_the_old_state_or_the_new_and_the_rerun_finishes(world, tmp_path, verb):
    root, model = world
    out, straight = tmp_path / "out", tmp_path / "straight"
    previous, new = commands(root, model, out)[verb]
    assert run_cli_child(previous) == 0
    old_state = table_bytes(out)
    uninterrupted_previous, uninterrupted_new = commands(root, model, straight)[verb]
    assert run_cli_child(uninterrupted_previous) == 0 and run_cli_child(uninterrupted_new) == 0
    new_state = table_bytes(straight)
    assert new_state != old_state
    for step in STEPS:
        assert run_cli_child(new, fault=step) == -signal.SIGKILL, step
        assert (out / LOCK).exists()  # the killed run's lock stays; the next run takes it over
        assert table_bytes(out) == (old_state if step in BEFORE_POINTER else new_state), step
    assert run_cli_child(new) == 0
    assert table_bytes(out) == new_state
    assert_published(out)
