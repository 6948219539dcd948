import math

import pytest
import torch

from bioel_core.training.losses import multi_similarity_loss
from bioel_core.training.miners import hard_pairs
from bioel_core.training.pairs import Pair, alignment_pairs, mention_pairs, names_by_concept

# four unit vectors at 0, 36.87, 53.13 and 90 degrees; concepts 0, 0, 1, 1
EMB = torch.tensor([[1.0, 0.0], [0.8, 0.6], [0.6, 0.8], [0.0, 1.0]])
LABELS = torch.tensor([0, 0, 1, 1])


def test_miner_keeps_only_hard_pairs():
    # distances: d01 = d23 = 0.632, d12 = 0.283, d02 = d13 = 0.894, d03 = 1.414
    # anchor 0: positive 1 at 0.632 + 0.2 < nearest negative 0.894 -> easy, nothing mined
    # anchor 1: positive 0 at 0.632 + 0.2 > negative 2 at 0.283 -> (1,0) hard, (1,2) hard, (1,3) at 0.894 not
    pos, neg = hard_pairs(EMB, LABELS, margin=0.2)
    assert pos.nonzero().tolist() == [[1, 0], [2, 3]]
    assert neg.nonzero().tolist() == [[1, 2], [2, 1]]
    pos, neg = hard_pairs(EMB, LABELS, margin=0.3)  # 0.632 + 0.3 > 0.894: anchor 0 now mines too
    assert pos.nonzero().tolist() == [[0, 1], [1, 0], [2, 3], [3, 2]]
    assert [0, 2] in neg.nonzero().tolist() and [0, 3] not in neg.nonzero().tolist()


def test_multi_similarity_loss_matches_hand_computation():
    pos, neg = hard_pairs(EMB, LABELS, margin=0.2)
    loss = multi_similarity_loss(EMB, pos, neg, neg_scale=60.0, pos_scale=1.0, offset=0.5)
    # anchors 1 and 2 each: S_neg = 0.96, S_pos = 0.8; anchors 0 and 3 have no pairs and add 0
    per_anchor = math.log1p(math.exp(60 * (0.96 - 0.5))) / 60 + math.log1p(math.exp(-(0.8 - 0.5)))
    assert loss.item() == pytest.approx(2 * per_anchor / 4, rel=1e-5)


def test_loss_gradient_pulls_positives_and_pushes_negatives():
    emb = EMB.clone().requires_grad_(True)
    pos, neg = hard_pairs(emb, LABELS, margin=0.2)
    multi_similarity_loss(emb, pos, neg).backward()
    step = emb - 0.1 * emb.grad
    after = multi_similarity_loss(step, pos, neg)
    assert after.item() < multi_similarity_loss(EMB, pos, neg).item()


def test_alignment_pairs_are_capped_per_concept_and_seeded():
    names = {"D1": [f"name {i}" for i in range(12)], "D2": ["a", "b", "b"]}
    pairs = alignment_pairs(names, max_pairs_per_concept=50, seed=3)
    assert sum(p.label == "D1" for p in pairs) == 50  # C(12, 2) = 66 trimmed to 50
    assert [p for p in pairs if p.label == "D2"] == [Pair("a", "b", "D2")]  # duplicates collapse
    assert pairs == alignment_pairs(names, max_pairs_per_concept=50, seed=3)
    assert pairs != alignment_pairs(names, max_pairs_per_concept=50, seed=4)


def test_mention_pairs_link_each_mention_to_every_gold_synonym():
    kb = names_by_concept(
        [
            {"concept_id": "D1", "name_norm": "breast cancer"},
            {"concept_id": "D1", "name_norm": "breast carcinoma"},
            {"concept_id": "D2", "name_norm": "ovarian cancer"},
        ]
    )
    pairs = mention_pairs([("breast cancer", ["D1"]), ("tumor", ["D9"])], kb)
    assert pairs == [Pair("breast cancer", "breast carcinoma", "D1")]


@pytest.fixture(scope="module")
def tiny_pairs():
    concepts = {
        "D1": ["breast cancer", "breast carcinoma", "mammary cancer"],
        "D2": ["ovarian cancer", "ovary carcinoma"],
        "D3": ["colon cancer", "colorectal carcinoma", "bowel cancer"],
        "D4": ["ataxia telangiectasia", "louis bar syndrome"],
    }
    return alignment_pairs(concepts)


def small_rescnn():
    models = pytest.importorskip("bioel_core.models")
    try:
        return models.ResCNNEncoder(num_blocks=1, filters=16, width=32)
    except FileNotFoundError as err:
        pytest.skip(str(err))


def test_a_tiny_training_run_lowers_the_loss(tmp_path, tiny_pairs):
    from bioel_core.training.loop import TrainConfig, batch_loss, train

    torch.manual_seed(0)
    encoder = small_rescnn()
    config = TrainConfig(epochs=40, batch_size=16, learning_rate=3e-3, use_miner=False, seed=0)
    encoder.eval()
    with torch.no_grad():
        before = batch_loss(encoder, tiny_pairs, config).item()
    stats = train(encoder, tiny_pairs, config, tmp_path, progress=False)
    with torch.no_grad():
        after = batch_loss(encoder, tiny_pairs, config).item()
    # the positive term alone is at least log(1 + e^-0.5) = 0.47 per anchor, so the floor is well above 0
    assert after < 0.8 * before and stats["steps"] == 40
    assert not (tmp_path / "checkpoint").exists()


def test_resume_after_a_stop_ends_with_the_uninterrupted_weights(tmp_path, tiny_pairs, monkeypatch):
    from bioel_core.models import load_encoder
    from bioel_core.training import loop

    config = loop.TrainConfig(epochs=6, batch_size=4, learning_rate=3e-3, checkpoint_every=5, seed=1)
    torch.manual_seed(0)
    straight = small_rescnn()
    torch.manual_seed(0)
    resumed = small_rescnn()
    loop.train(straight, tiny_pairs, config, tmp_path / "a", progress=False)

    real_loss, calls = loop.batch_loss, {"n": 0}

    def stop_at_step_8(*args):
        calls["n"] += 1
        if calls["n"] == 8:
            raise KeyboardInterrupt
        return real_loss(*args)

    monkeypatch.setattr(loop, "batch_loss", stop_at_step_8)
    with pytest.raises(KeyboardInterrupt):
        loop.train(resumed, tiny_pairs, config, tmp_path / "b", progress=False)
    assert (tmp_path / "b/checkpoint/state.json").is_file()
    monkeypatch.setattr(loop, "batch_loss", real_loss)
    stats = loop.train(resumed, tiny_pairs, config, tmp_path / "b", load_encoder=load_encoder, progress=False)
    assert stats["resumed_from"] == 5
    for (name, a), (_, b) in zip(straight.state_dict().items(), resumed.state_dict().items()):
        assert torch.allclose(a, b, atol=1e-6), name


class TableEncoder:
    """Fixed vectors per text: mining is checked against hand-computed neighbours."""

    def __init__(self, table: dict[str, list[float]]):
        self.table, self.dim = table, 2

    def encode(self, texts, batch_size=256, show_progress=False):
        import numpy as np

        v = np.array([self.table[t] for t in texts], dtype=np.float32)
        return v / np.linalg.norm(v, axis=1, keepdims=True)


def test_mined_negatives_skip_gold_and_repeat_concepts_best_first():
    from bioel_core.training.hard_negatives import mine_negatives

    kb = {"D1": ["breast cancer", "mammary cancer"], "D2": ["breast cyst"], "D3": ["breast pain", "mastalgia"], "D4": ["gout"]}
    # angles from the mention "breast tumor" at 0 deg: breast cancer 5, breast cyst 10, breast pain 20,
    # mastalgia 15, mammary cancer 30, gout 90
    deg = {
        "breast tumor": 0,
        "breast cancer": 5,
        "breast cyst": 10,
        "mastalgia": 15,
        "breast pain": 20,
        "mammary cancer": 30,
        "gout": 90,
    }
    encoder = TableEncoder({t: [math.cos(math.radians(a)), math.sin(math.radians(a))] for t, a in deg.items()})
    negatives = mine_negatives(encoder, [("breast tumor", ["D1"])], kb, per_mention=2)
    # D1 is gold; D2 at 10 deg, then D3 through its nearest name mastalgia (15 deg), never twice
    assert negatives == [[("D2", "breast cyst"), ("D3", "mastalgia")]]


def test_hard_negative_batches_hold_each_mention_with_its_negatives():
    from bioel_core.training.hard_negatives import hard_negative_batches

    kb = {"D1": ["breast cancer", "mammary cancer"], "D2": ["breast cyst"], "D3": ["breast pain", "mastalgia"]}
    mentions = [("breast tumor", ["D1"]), ("cyst of breast", ["D2"]), ("no names", ["D9"])]
    negatives = [[("D2", "breast cyst"), ("D3", "mastalgia")], [("D1", "breast cancer"), ("D3", "breast pain")], []]
    batches = hard_negative_batches(mentions, kb, negatives, pairs_per_batch=3, seed=0)
    assert len(batches) == 2  # one mention (3 pairs) per batch; the mention without KB names is left out
    by_anchor = {b[0].left: b for b in batches}
    assert [p.label for p in by_anchor["breast tumor"]] == ["D1", "D2", "D3"]
    assert by_anchor["breast tumor"][1] == Pair("breast cyst", "breast cyst", "D2")  # one name: paired with itself
    assert by_anchor["breast tumor"][2] == Pair("mastalgia", "breast pain", "D3")
    assert by_anchor["cyst of breast"][0] == Pair("cyst of breast", "breast cyst", "D2")
    assert batches == hard_negative_batches(mentions, kb, negatives, pairs_per_batch=3, seed=0)


def test_hard_negative_training_resumes_on_the_same_mined_batches(tmp_path, monkeypatch):
    from bioel_core.models import load_encoder
    from bioel_core.training import loop
    from bioel_core.training.hard_negatives import HardNegativeBatcher

    kb = {
        "D1": ["breast cancer", "breast carcinoma", "mammary cancer"],
        "D2": ["ovarian cancer", "ovary carcinoma"],
        "D3": ["colon cancer", "colorectal carcinoma", "bowel cancer"],
        "D4": ["ataxia telangiectasia", "louis bar syndrome"],
    }
    mentions = [
        ("cancer of the breast", ["D1"]),
        ("ovary cancer", ["D2"]),
        ("colon carcinoma", ["D3"]),
        ("ataxia", ["D4"]),
        ("breast tumour", ["D1"]),
        ("bowel carcinoma", ["D3"]),
    ]
    config = loop.TrainConfig(epochs=3, batch_size=4, learning_rate=3e-3, checkpoint_every=2, seed=1)

    def run(folder, encoder, **kw):
        batcher = HardNegativeBatcher(encoder, mentions, kb, 1, config.batch_size, config.seed, folder / "mined")
        assert batcher.steps_per_epoch() == 3  # 2 mentions (4 pairs) per step
        return loop.train(encoder, [], config, folder, batcher=batcher, progress=False, **kw)

    torch.manual_seed(0)
    straight = small_rescnn()
    torch.manual_seed(0)
    resumed = small_rescnn()
    stats = run(tmp_path / "a", straight)
    assert stats["steps"] == 9 and stats["pairs"] == 12
    assert sorted(p.name for p in (tmp_path / "a/mined").iterdir()) == [f"negatives-epoch{e}.json" for e in range(3)]

    real_loss, calls = loop.batch_loss, {"n": 0}

    def stop_at_step_6(*args):
        calls["n"] += 1
        if calls["n"] == 6:
            raise KeyboardInterrupt
        return real_loss(*args)

    monkeypatch.setattr(loop, "batch_loss", stop_at_step_6)
    with pytest.raises(KeyboardInterrupt):
        run(tmp_path / "b", resumed)
    monkeypatch.setattr(loop, "batch_loss", real_loss)
    assert run(tmp_path / "b", resumed, load_encoder=load_encoder)["resumed_from"] == 4
    for (name, a), (_, b) in zip(straight.state_dict().items(), resumed.state_dict().items()):
        assert torch.allclose(a, b, atol=1e-6), name


def test_infonce_matches_hand_computation():
    from bioel_core.training.losses import supervised_infonce_loss

    # cosines: S01 = 0.8, S02 = 0.6, S03 = 0, S12 = 0.96, S13 = 0.6, S23 = 0.8; labels 0, 0, 1, 1
    t = 0.5
    e = {(0, 1): 0.8, (0, 2): 0.6, (0, 3): 0.0, (1, 2): 0.96, (1, 3): 0.6, (2, 3): 0.8}
    s = lambda i, j: e[(min(i, j), max(i, j))] / t  # noqa: E731
    pos = {0: 1, 1: 0, 2: 3, 3: 2}
    expected = sum(math.log(sum(math.exp(s(i, j)) for j in range(4) if j != i)) - s(i, pos[i]) for i in range(4)) / 4
    assert supervised_infonce_loss(EMB, LABELS, temperature=t).item() == pytest.approx(expected, rel=1e-5)
    # a lone label has no positive: it is no anchor, and a batch without any positive costs nothing
    assert supervised_infonce_loss(EMB, torch.tensor([0, 1, 2, 3])).item() == 0.0


def _one_name_kb_and_dataset(tmp_path):
    """A users'-own-data shape: consumer-language adverse reaction mentions, a dictionary with exactly one name per
    concept and local (non-MeSH) ids, a BioSyn dataset folder."""
    from pipelines import cli

    dictionary = tmp_path / "adr_dictionary.txt"
    dictionary.write_text("ADR0001||headache\nADR0002||nausea\nADR0003||insomnia\nADR0004||dizziness\n")
    kb = tmp_path / "kb"
    assert (
        cli.main(
            [
                "ingest-kb",
                "--input-format",
                "biosyn-dict",
                "--kb-name",
                "adr",
                "--id-pattern",
                r"ADR\d{4}",
                "--input",
                str(dictionary),
                "--output",
                str(kb),
                "--num-shards",
                "1",
                "--no-quality",
            ]
        )
        == 0
    )
    queries = tmp_path / "adr" / "processed_traindev"
    queries.mkdir(parents=True)
    (queries / "post1.concept").write_text("post1||0|11||ADR||head hurts||ADR0001\npost1||20|31||ADR||felt sick||ADR0002\n")
    (queries / "post2.concept").write_text(
        "post2||0|9||ADR||cant sleep||ADR0003\npost2||12|20||ADR||room spinning||ADR0004\npost2||30|40||ADR||mystery||ADR9999\n"
    )
    return kb, tmp_path / "adr"


def test_a_one_name_per_concept_kb_skips_alignment_and_fine_tunes(tmp_path, capsys):
    import json

    from pipelines import cli

    kb, dataset = _one_name_kb_and_dataset(tmp_path)
    capsys.readouterr()
    out = tmp_path / "model"
    assert (
        cli.main(
            [
                "train",
                "rescnn",
                "--names",
                str(kb),
                "--train-dataset",
                str(dataset),
                "--output",
                str(out),
                "--finetune-max-steps",
                "2",
                "--batch-size",
                "8",
                "--device",
                "cpu",
                "--no-progress",
            ]
        )
        == 0
    )
    err = capsys.readouterr().err
    assert "note: self-alignment skipped: no concept of the KB" in err
    # the query whose id is not in the KB is counted in the card and said on stderr (it was in the card only)
    assert (
        f"note: fine-tuning: 1 queries of {dataset}/processed_traindev left out: no concept id (-1, CUI-less), no id "
        f"of the KB {kb}, or a composite whose parts and ids differ in number"
    ) in err
    card = json.loads((out / "card.json").read_text())
    assert card["data"]["align_skipped"] and set(card["stages"]) == {"finetune"}
    assert card["data"]["train_mentions"] == 4 and card["data"]["train_queries_unusable"] == 1  # ADR9999 is not in the KB


def test_nothing_to_train_names_the_stage_the_input_and_why(tmp_path, capsys):
    from pipelines import cli

    kb, dataset = _one_name_kb_and_dataset(tmp_path)
    capsys.readouterr()
    code = cli.main(["train", "rescnn", "--names", str(kb), "--output", str(tmp_path / "m"), "--device", "cpu"])
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert code == 2 and err.startswith("bioel train: error: --train-dataset: nothing to train: self-alignment has no pairs")
    assert str(kb) in err
    (dataset / "processed_traindev" / "post1.concept").unlink()
    (dataset / "processed_traindev" / "post2.concept").write_text("post2||30|40||ADR||mystery||ADR9999\n")
    code = cli.main(
        [
            "train",
            "rescnn",
            "--names",
            str(kb),
            "--train-dataset",
            str(dataset),
            "--output",
            str(tmp_path / "m"),
            "--device",
            "cpu",
        ]
    )
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert code == 2 and "fine-tuning: no usable training mention in" in err and "processed_traindev" in err


@pytest.mark.parametrize(
    "flag, value, reason",
    [
        ("--finetune-max-steps", "0", "must be at least 1, got 0"),  # was a TypeError traceback writing the card, exit 1
        ("--batch-size", "0", "must be at least 1, got 0"),  # trained, exit 0
        ("--patience", "0", "must be at least 1, got 0"),  # stopped at the first dev score, exit 0
        ("--finetune-epochs", "-1", "must be at least 0, got -1"),  # 'no fine-tuning data was given (--train-dataset)'
        ("--align-epochs", "-2", "must be at least 0, got -2"),  # alignment skipped silently, exit 0
        ("--max-minutes", "-1", "must be above 0, got -1"),  # trained one step, exit 0
    ],
)
def test_train_refuses_counts_and_budgets_out_of_range_before_any_work(tmp_path, capsys, flag, value, reason):
    from pipelines import cli

    code = cli.main(["train", "rescnn", "--names", str(tmp_path / "kb"), "--output", str(tmp_path / "m"), flag, value])
    assert code == 2 and capsys.readouterr().err.strip() == f"bioel train: error: {flag}: {reason}"
    assert not (tmp_path / "m").exists()


def test_learning_rate_rises_linearly_then_falls_to_zero():
    from bioel_core.training.loop import TrainConfig, learning_rate_at

    config = TrainConfig(learning_rate=1.0, warmup=0.2)
    assert [round(learning_rate_at(s, 10, config), 4) for s in range(10)] == [
        0.5,
        1.0,
        1.0,
        0.875,
        0.75,
        0.625,
        0.5,
        0.375,
        0.25,
        0.125,
    ]


def _scripted_dev(encoder, scores):
    """A dev scorer returning `scores` in turn and remembering the weights it scored."""
    seen = []

    def score():
        seen.append({k: v.clone() for k, v in encoder.state_dict().items()})
        return scores[len(seen) - 1]

    return score, seen


def test_the_best_dev_epoch_is_kept_and_patience_stops_training(tmp_path, tiny_pairs):
    from bioel_core.models import load_encoder
    from bioel_core.training.loop import TrainConfig, train

    torch.manual_seed(0)
    encoder = small_rescnn()
    score, seen = _scripted_dev(encoder, [50.0, 90.0, 70.0, 90.0, 60.0, 99.0])
    config = TrainConfig(epochs=10, batch_size=8, learning_rate=3e-3, patience=3, seed=0)
    stats = train(encoder, tiny_pairs, config, tmp_path, load_encoder=load_encoder, progress=False, dev_score=score)
    # epoch 2 is best; 3, 4 (a tie is no improvement) and 5 are not better: stop after epoch 5, never reaching 99
    assert [h["score"] for h in stats["dev"]] == [50.0, 90.0, 70.0, 90.0, 60.0]
    assert (
        stats["stopped_by"] == "patience" and stats["best_dev"]["epoch"] == 2 and stats["steps"] == 5
    )  # 8 pairs: one step an epoch
    for name, value in encoder.state_dict().items():
        assert torch.equal(value, seen[1][name]), name
    assert not (tmp_path / "best").exists() and not (tmp_path / "checkpoint").exists()


def test_the_time_budget_ends_after_the_running_step_with_the_best_model(tmp_path, tiny_pairs):
    from bioel_core.models import load_encoder
    from bioel_core.training.loop import TrainConfig, train

    torch.manual_seed(0)
    encoder = small_rescnn()
    score, seen = _scripted_dev(encoder, [42.0])
    config = TrainConfig(epochs=10, batch_size=8, learning_rate=3e-3, max_minutes=1e-9, seed=0)
    stats = train(encoder, tiny_pairs, config, tmp_path, load_encoder=load_encoder, progress=False, dev_score=score)
    assert stats["steps"] == 1 and stats["stopped_by"] == "time budget" and stats["best_dev"]["score"] == 42.0
    for name, value in encoder.state_dict().items():
        assert torch.equal(value, seen[0][name]), name


def test_with_a_dev_split_the_default_recipe_trains_on_train_and_dev_chooses_the_epoch(tmp_path, capsys):
    import json
    import shutil

    from pipelines import cli

    kb, dataset = _one_name_kb_and_dataset(tmp_path)
    shutil.copytree(dataset / "processed_traindev", dataset / "processed_train")
    (dataset / "processed_dev").mkdir()
    (dataset / "processed_dev" / "post9.concept").write_text(
        "post9||0|8||ADR||migraine||ADR0001\npost9||9|17||ADR||queasy||ADR0002\n"
    )
    out = tmp_path / "model"
    assert (
        cli.main(
            [
                "train",
                "rescnn",
                "--names",
                str(kb),
                "--train-dataset",
                str(dataset),
                "--output",
                str(out),
                "--batch-size",
                "8",
                "--patience",
                "2",
                "--device",
                "cpu",
                "--no-progress",
            ]
        )
        == 0
    )
    card = json.loads((out / "card.json").read_text())
    finetune = card["stages"]["finetune"]
    assert card["data"]["train_split"] == "train" and "dev" in card["data"]["model_selection"]
    # 4 mentions make one step an epoch: small data trains at least 1,500 steps, scoring dev every 200
    assert finetune["config"]["epochs"] == 20 and finetune["epochs"] == 1500 and finetune["dev_every_epochs"] == 200
    assert [h["epoch"] for h in finetune["dev"]] == [200 * (i + 1) for i in range(len(finetune["dev"]))]
    assert 3 <= len(finetune["dev"]) <= 8
    assert finetune["stopped_by"] in ("patience", "steps") and finetune["best_dev"]["score"] == max(
        h["score"] for h in finetune["dev"]
    )
    assert "dev acc@1 by epoch (epoch: score): 200: " in (out / "MODEL_CARD.md").read_text()


@pytest.mark.parametrize("encoder", ["transformer", "rescnn"])
def test_init_with_a_model_folder_of_another_kind_is_refused(tmp_path, capsys, encoder):
    # `train transformer --init models/disease-default` trained the ResCNN on, said 'trained transformer' and exited 0
    # (and `train rescnn` with a transformer folder the same the other way round)
    from bioel_core.models import TransformerEncoder, shipped_path
    from pipelines import cli
    from test_models import make_tiny_bert

    kb, dataset = _one_name_kb_and_dataset(tmp_path)
    other = {
        "transformer": shipped_path("disease-default"),
        "rescnn": TransformerEncoder(make_tiny_bert(tmp_path / "bert")).save(tmp_path / "tf"),
    }[encoder]
    found = "rescnn" if encoder == "transformer" else "transformer"
    capsys.readouterr()
    code = cli.main(
        [
            "train",
            encoder,
            "--init",
            str(other),
            "--names",
            str(kb),
            "--train-dataset",
            str(dataset),
            "--output",
            str(tmp_path / "m"),
            "--device",
            "cpu",
            "--finetune-max-steps",
            "1",
        ]
    )
    assert code == 2 and capsys.readouterr().err.strip().splitlines()[-1] == (
        f"bioel train: error: --init: {other}: a {found} model folder, which the {found} kind trains on "
        f"(a {encoder} starts from a Hugging Face checkpoint or a {encoder} model folder)"
    )
    assert not (tmp_path / "m").exists()


def test_a_model_trained_again_into_its_folder_gets_a_card_of_its_own(tmp_path, capsys):
    # the card of the model trained there before must not refuse the new weights (load_encoder checks a folder
    # against its card)
    import json

    from bioel_core.models import load_encoder
    from pipelines import cli

    kb, dataset = _one_name_kb_and_dataset(tmp_path)
    out = tmp_path / "model"
    for seed in ("0", "1"):
        assert (
            cli.main(
                [
                    "train",
                    "rescnn",
                    "--names",
                    str(kb),
                    "--train-dataset",
                    str(dataset),
                    "--output",
                    str(out),
                    "--finetune-max-steps",
                    "1",
                    "--batch-size",
                    "8",
                    "--seed",
                    seed,
                    "--device",
                    "cpu",
                    "--no-progress",
                ]
            )
            == 0
        )
        assert json.loads((out / "card.json").read_text())["fingerprint"] == load_encoder(out).fingerprint()
