"""EnsembleEncoder: the weighted concatenation ranks by the weighted mean of member cosines, saves references
only, refuses changed members, and is what `bioel ensemble` writes."""

import json
import shutil

import faiss
import numpy as np
import pytest
import torch

from bioel_core.linking.dense import DenseLinker
from bioel_core.names import NameSet
from bioel_core.models import EnsembleEncoder, MemberChangedError, load_encoder
from bioel_core.models.cards import record_scores
from bioel_core.models.ensemble import make_ensemble
from bioel_core.training.recipe import new_encoder
from pipelines import cli
from pipelines.handlers import EncodeFailure, EncoderModelHandler
from test_models import TEXTS, make_tiny_bert, perturb, tiny_rescnn

QUERIES = ["heart disease", "ovarian cancer", "diabetes type 2"]


@pytest.fixture()
def members(tmp_path):
    """models/rescnn (a saved bioel folder) and models/bert (a plain HF checkpoint, read with mean pooling)."""
    bert = make_tiny_bert(tmp_path / "models" / "bert")
    tiny_rescnn(bert).save(tmp_path / "models" / "rescnn")
    return tmp_path / "models"


def test_inner_products_are_the_weighted_mean_of_member_cosines(members, tmp_path):
    ensemble = EnsembleEncoder.from_folders([(members / "rescnn", 3.0, None), (members / "bert", 1.0, "mean")])
    rescnn, bert = ensemble.members
    assert ensemble.dim == rescnn.dim + bert.dim
    names, queries = ensemble.encode(TEXTS), ensemble.encode(QUERIES)
    np.testing.assert_allclose(np.linalg.norm(names, axis=1), 1.0, atol=1e-6)
    reference = (3 * rescnn.encode(QUERIES) @ rescnn.encode(TEXTS).T + bert.encode(QUERIES) @ bert.encode(TEXTS).T) / 4
    np.testing.assert_allclose(queries @ names.T, reference, atol=1e-6)
    # so an exact inner-product index over the concatenation returns the reference ranking
    index = faiss.IndexFlatIP(ensemble.dim)
    index.add(names)
    _, rows = index.search(queries, len(TEXTS))
    np.testing.assert_array_equal(rows, np.argsort(-reference, axis=1, kind="stable"))


def test_save_writes_relative_references_and_load_gives_identical_vectors(members, tmp_path):
    ensemble = EnsembleEncoder.from_folders([(members / "rescnn", 0.5, None), (members / "bert", 0.5, "mean")])
    ensemble.save(members / "ensemble")
    config = json.loads((members / "ensemble" / "bioel_encoder.json").read_text())
    assert [m["source"] for m in config["members"]] == [{"path": "../rescnn"}, {"path": "../bert", "pooling": "mean"}]
    assert sorted(p.name for p in (members / "ensemble").iterdir()) == ["bioel_encoder.json"]
    # members are found beside the ensemble wherever the folders are copied together
    moved = shutil.copytree(members, tmp_path / "elsewhere")
    loaded = load_encoder(moved / "ensemble")
    assert isinstance(loaded, EnsembleEncoder)
    assert [s["path"] for s in loaded.sources] == [str(moved / "rescnn"), str(moved / "bert")]
    assert loaded.fingerprint() == ensemble.fingerprint()
    np.testing.assert_array_equal(loaded.encode(TEXTS), ensemble.encode(TEXTS))


def test_a_changed_member_is_refused_and_changes_the_fingerprint(members):
    make_ensemble([(str(members / "rescnn"), 1.0, None), (str(members / "bert"), 1.0, "mean")], members / "ensemble")
    before = load_encoder(members / "ensemble").fingerprint()
    rescnn = load_encoder(members / "rescnn")
    perturb(rescnn)
    rescnn.save(members / "rescnn")
    with pytest.raises(MemberChangedError, match="member 0 .* re-create the ensemble"):
        load_encoder(members / "ensemble")
    make_ensemble([(str(members / "rescnn"), 1.0, None), (str(members / "bert"), 1.0, "mean")], members / "ensemble")
    assert load_encoder(members / "ensemble").fingerprint() != before


def test_bad_ensembles_are_refused(members):
    with pytest.raises(ValueError, match="at least two members"):
        EnsembleEncoder.from_folders([(members / "rescnn", 1.0, None)])
    with pytest.raises(ValueError, match="must be positive"):
        EnsembleEncoder.from_folders([(members / "rescnn", 1.0, None), (members / "bert", 0.0, "mean")])
    make_ensemble([(str(members / "rescnn"), 1.0, None), (str(members / "bert"), 1.0, "mean")], members / "ensemble")
    with pytest.raises(ValueError, match="not trained as one"):
        new_encoder("transformer", str(members / "ensemble"), None, "cpu")
    with pytest.raises(TypeError, match="not trained as one"):
        load_encoder(members / "ensemble")(torch.zeros(1, 2, dtype=torch.long), torch.ones(1, 2, dtype=torch.long))


def test_dense_linker_over_an_ensemble_links_like_its_reference(members):
    make_ensemble([(str(members / "rescnn"), 2.0, None), (str(members / "bert"), 1.0, "mean")], members / "ensemble")
    names = NameSet.from_pairs([(t, (f"D{i:06d}",)) for i, t in enumerate(TEXTS)])
    linker = DenseLinker.build(names, str(members / "ensemble"))
    ensemble = linker.encoder
    reference = ensemble.encode(QUERIES) @ ensemble.encode(linker.exact.row_names).T
    got = [c[0].name for c in linker.search(QUERIES, 1)]
    assert got == [linker.exact.row_names[i] for i in reference.argmax(axis=1)]


def test_cli_writes_the_folder_and_its_card(members, capsys):
    out = members / "ens"
    code = cli.main(
        [
            "ensemble",
            "--member",
            str(members / "rescnn"),
            "3",
            "--member",
            str(members / "bert"),
            "1",
            "mean",
            "--output",
            str(out),
        ]
    )
    assert code == 0, capsys.readouterr().err
    card = json.loads((out / "card.json").read_text())
    assert [(m["encoder_type"], m["weight"]) for m in card["members"]] == [("rescnn", 3.0), ("transformer", 1.0)]
    assert card["fingerprint"] == load_encoder(out).fingerprint()
    card_md = (out / "MODEL_CARD.md").read_text()
    assert "| `../rescnn` | rescnn | 3 |" in card_md and "| `../bert`, mean pooling | transformer | 1 |" in card_md
    assert (
        cli.main(
            [
                "ensemble",
                "--member",
                str(members / "rescnn"),
                "x",
                "--member",
                str(members / "bert"),
                "1",
                "mean",
                "--output",
                str(out),
            ]
        )
        == 2
    )
    assert "weight 'x' is not a number" in capsys.readouterr().err


def test_scores_are_recorded_in_an_ensemble_card(members):
    make_ensemble([(str(members / "rescnn"), 1.0, None), (str(members / "bert"), 1.0, "mean")], members / "ensemble")
    record_scores(members / "ensemble", {"dataset": "ncbi-disease", "split": "dev", "n": 787, "acc@1": 91.36, "acc@5": 95.17})
    assert json.loads((members / "ensemble" / "card.json").read_text())["scores"]["ncbi-disease/dev"]["acc@1"] == 91.36
    assert "| ncbi-disease | dev | linker | 787 | 91.36 | 95.17 |" in (members / "ensemble" / "MODEL_CARD.md").read_text()


def test_the_beam_encode_handler_runs_an_ensemble_folder(members):
    make_ensemble([(str(members / "rescnn"), 1.0, None), (str(members / "bert"), 1.0, "mean")], members / "ensemble")
    expected = load_encoder(members / "ensemble")
    handler = EncoderModelHandler(str(members / "ensemble"), fingerprint=expected.fingerprint())
    model = handler.load_model()
    [result] = handler.run_inference([TEXTS + [""]], model)  # one example: a chunk of texts
    np.testing.assert_allclose(np.stack(result.inference[:-1]), expected.encode(TEXTS), atol=1e-6)
    assert isinstance(result.inference[-1], EncodeFailure)
