"""The training contracts (bioel_core.settings.train) and `bioel train KIND` made from them: each kind validated
once with errors naming the field, its own defaults, flags = fields, at most 25 flags a kind, the 0.2 form refused
naming the new one, and cards recorded in the 0.2 form shown in today's."""

from __future__ import annotations

import argparse
import json
import shlex

import pytest

from bioel_core.settings import SettingsError, fields_of, from_mapping
from bioel_core.settings.train import (
    TRAIN_KINDS,
    CollectiveSettings,
    CrossEncoderSettings,
    GenerativeSettings,
    ResCNNSettings,
    TransformerSettings,
)
from conftest import REPO

MAX_FLAGS = 25


def kind_parsers() -> dict[str, argparse.ArgumentParser]:
    from pipelines import cli

    verbs = next(a for a in cli.build_parser()._actions if a.dest == "verb").choices
    train = verbs["train"]
    return {"": train, **next(a for a in train._actions if a.dest == "kind").choices}


def shown_flags(parser: argparse.ArgumentParser) -> list[str]:
    """The options `--help` lists (-h included; hidden ones, such as -v after the verb, not)."""
    return [a.option_strings[-1] for a in parser._actions if a.option_strings and a.help != argparse.SUPPRESS]


@pytest.mark.parametrize(
    "cls, values, field, reason",
    [
        (TransformerSettings, {"batch_size": 0}, "batch_size", "must be at least 1, got 0"),
        (TransformerSettings, {"pooling": "max"}, "pooling", "'max' is not one of cls, mean"),
        (TransformerSettings, {"names": "Disease=kb"}, "names", "Disease=kb: one KB folder, not TYPE=KB_DIR"),
        (TransformerSettings, {"device": "gpu"}, "device", "'gpu' is not a device: auto, cpu, cuda or cuda:N"),
        (ResCNNSettings, {"pooling": "cls"}, "pooling", "'cls' is not one of max, attention"),
        (ResCNNSettings, {"lr": 0.0}, "lr", "must be above 0, got 0"),
        (ResCNNSettings, {"warmup": 1.5}, "warmup", "a share of the steps, at most 1, got 1.5"),
        (ResCNNSettings, {"max_minutes": -1.0}, "max_minutes", "must be above 0, got -1"),
        (CrossEncoderSettings, {"train_dataset": []}, "train_dataset", "a cross-encoder learns from training mentions"),
        (CrossEncoderSettings, {"train_dataset": ["d"], "retriever_weight": -1.0}, "retriever_weight", "must be at least 0"),
        (GenerativeSettings, {"pretrain_epochs": 0}, "pretrain_epochs", "nothing to train"),
        (
            GenerativeSettings,
            {"pretrain_epochs": 0, "train_dataset": ["d"], "finetune_epochs": 0},
            "pretrain_epochs",
            "nothing to train",
        ),
        (GenerativeSettings, {"target_name": "longest"}, "target_name", "'longest' is not one of tfidf, shortest, random"),
    ],
)
def test_each_name_and_mention_contract_refuses_bad_values_naming_the_field(cls, values, field, reason):
    with pytest.raises(SettingsError) as caught:
        cls(**{"output": "m", "names": "kb", **values})
    assert caught.value.field == field and caught.value.reason.startswith(reason)


@pytest.mark.parametrize(
    "values, field, reason",
    [
        ({"names": ["kb"]}, "names", "kb: expected TYPE=KB_DIR, one per entity type"),
        ({"names": ["Disease=a", "Disease=b"]}, "names", "entity type Disease given twice"),
        ({"names": ["1x=a"]}, "names", "1x=a: an entity type is a letter"),
        ({"train_corpus": ["Disease="]}, "train_corpus", "Disease=: expected [TYPE[,TYPE...]=]PATH, PATH not empty"),
        ({"dev_corpus": []}, "dev_corpus", "no corpus given"),
        ({"mention_pooling": "max"}, "mention_pooling", "'max' is not one of endpoints, mean"),
        ({"epochs": 0}, "epochs", "must be at least 1, got 0"),
    ],
)
def test_the_collective_contract_refuses_bad_values_naming_the_field(values, field, reason):
    base = {"output": "m", "names": ["Disease=kb"], "train_corpus": ["t.txt"], "dev_corpus": ["d.txt"]}
    with pytest.raises(SettingsError) as caught:
        from_mapping(CollectiveSettings, {**base, **values})
    assert caught.value.field == field and caught.value.reason.startswith(reason)
    with pytest.raises(SettingsError, match=r"^train_corpus: required"):
        from_mapping(CollectiveSettings, {k: v for k, v in base.items() if k != "train_corpus"})


def test_each_kind_holds_its_own_defaults():
    made = {
        kind: from_mapping(
            cls,
            {
                "output": "m",
                "names": ["Disease=kb"] if kind == "collective" else "kb",
                **({"train_corpus": ["t"], "dev_corpus": ["d"]} if kind == "collective" else {}),
                **({"train_dataset": ["d"]} if kind == "cross-encoder" else {}),
            },
        )
        for kind, cls in TRAIN_KINDS.items()
    }
    assert {k: s.lr for k, s in made.items()} == {
        "transformer": 2e-5,
        "rescnn": 1e-3,
        "collective": 5e-5,
        "cross-encoder": 2e-5,
        "generative": 1e-4,
    }
    assert {k: getattr(s, "batch_size", None) for k, s in made.items()} == {
        "transformer": 128,
        "rescnn": 128,
        "collective": None,
        "cross-encoder": 8,
        "generative": 32,
    }
    assert {k: s.save_dtype for k, s in made.items()} == {
        "transformer": "float32",
        "rescnn": "float32",
        "collective": "float16",
        "cross-encoder": "float32",
        "generative": "float32",
    }
    assert made["rescnn"].pooling == "max" and made["transformer"].pooling is None
    assert made["collective"].kb_folders() == {"Disease": "kb"}


def test_the_choices_stated_for_the_models_are_the_models_own():
    from bioel_core.models import collective, rescnn, transformer
    from bioel_core.settings import train
    from bioel_core.training import generative, loop

    assert train.TRANSFORMER_POOLINGS == transformer.POOLINGS and train.RESCNN_POOLINGS == rescnn.POOLINGS
    assert train.MENTION_POOLINGS == collective.MENTION_POOLINGS
    assert train.NAME_ENCODER_LOSSES == loop.LOSSES and train.TARGET_NAMES == generative.TARGETS


def test_each_kind_has_one_flag_per_field_and_at_most_25_flags():
    parsers = kind_parsers()
    assert set(parsers) == {"", *TRAIN_KINDS}
    for kind, parser in parsers.items():
        flags = shown_flags(parser)
        assert len(flags) <= MAX_FLAGS, (kind or "train", len(flags))
        if kind:  # generated from the contract: one flag per field, named after it, and -h
            assert sorted(flags) == sorted(["--help"] + ["--" + f.name.replace("_", "-") for f in fields_of(TRAIN_KINDS[kind])])
            assert parser.get_default("train_flags").cls is TRAIN_KINDS[kind]
    assert shown_flags(parsers[""]) == ["--help"]  # `bioel train --help` lists the kinds, no flag of theirs


def test_bioel_train_help_lists_the_kinds(capsys):
    from pipelines import cli

    assert cli.main(["train", "--help"]) == 0
    out = capsys.readouterr().out
    assert all(f"    {kind}" in out for kind in TRAIN_KINDS)
    assert cli.main(["train", "cross-encoder", "--help"]) == 0
    out = capsys.readouterr().out
    assert "--batch-size BATCH_SIZE" in out and "(default 8)" in out and "--pretrain-epochs" not in out


def test_the_0_2_form_is_refused_with_one_line_naming_the_new_one(tmp_path, capsys):
    from pipelines import cli

    code = cli.main(["train", "--encoder", "rescnn", "--names", str(tmp_path / "kb"), "--output", str(tmp_path / "m")])
    err = capsys.readouterr().err
    assert code == 2 and err == (
        "bioel train: error: --encoder was removed in bioel 0.3: the kind is a subcommand, "
        "`bioel train rescnn ...` (`bioel train rescnn --help` lists its flags)\n"
    )
    assert not (tmp_path / "m").exists()


def test_a_contract_error_is_one_line_naming_the_flag(tmp_path, capsys):
    from pipelines import cli

    argv = [
        "train",
        "collective",
        "--names",
        str(tmp_path / "kb"),
        "--train-corpus",
        "t",
        "--dev-corpus",
        "d",
        "--output",
        str(tmp_path / "m"),
    ]
    assert cli.main(argv) == 2
    assert (
        capsys.readouterr().err == f"bioel train: error: --names: {tmp_path / 'kb'}: expected TYPE=KB_DIR, one per entity type\n"
    )
    assert cli.main(["train", "generative", "--names", "kb", "--pretrain-epochs", "0", "--output", str(tmp_path / "m")]) == 2
    assert capsys.readouterr().err.startswith("bioel train: error: --pretrain-epochs: nothing to train")
    assert not (tmp_path / "m").exists()


def test_cards_recorded_in_the_0_2_form_show_a_command_that_parses_today():
    from bioel_core.models.cards import current_command
    from pipelines import cli

    assert (
        current_command("bioel train --names a --encoder cross-encoder --output b")
        == "bioel train cross-encoder --names a --output b"
    )
    assert current_command("bioel train rescnn --names a") is None
    assert current_command("bioel ensemble --member m 1 --output e") is None
    folders = [
        card.parent
        for card in sorted(REPO.glob("models/*/card.json"))
        if json.loads(card.read_text())["command"].startswith("bioel train")
    ]
    assert len(folders) >= 5
    for folder in folders:
        recorded = json.loads((folder / "card.json").read_text())["command"]
        today = current_command(recorded) or recorded  # None: recorded in today's form already
        args = cli.build_parser().parse_args(shlex.split(today)[1:])  # exits on any flag the kind does not take
        assert args.kind in TRAIN_KINDS and today in (folder / "MODEL_CARD.md").read_text()


def test_the_fine_tuning_plan_follows_the_datasets_splits(tmp_path):
    """dev chooses the epoch when every dataset has processed_dev and train is trained on; the default epochs then
    stretch to small data's minimum of steps (what the CLI's 0.2 code decided from argparse values)."""
    from bioel_core.training.recipe import DEV_EVERY_STEPS, FINETUNE_MIN_STEPS, finetune_plan, stage_config

    with_dev, without = tmp_path / "a", tmp_path / "b"
    (with_dev / "processed_dev").mkdir(parents=True)
    without.mkdir()
    settings = ResCNNSettings(output="m", names="kb", train_dataset=[str(with_dev)], batch_size=8)
    plan = finetune_plan(settings)
    assert (plan.split, plan.epochs, plan.dev_chooses, plan.small_data) == ("train", 20, True, True)
    config = stage_config(settings, epochs=plan.epochs, loss="multi-similarity", plan=plan)
    assert (config.min_steps, config.dev_every_steps, config.batch_size, config.learning_rate) == (
        FINETUNE_MIN_STEPS,
        DEV_EVERY_STEPS,
        8,
        1e-3,
    )
    given = finetune_plan(ResCNNSettings(output="m", names="kb", train_dataset=[str(with_dev)], finetune_epochs=2))
    assert (given.epochs, given.small_data) == (2, False)
    assert finetune_plan(ResCNNSettings(output="m", names="kb", train_dataset=[str(with_dev), str(without)])) == type(plan)(
        "traindev", 3, False, False
    )
    assert (
        finetune_plan(ResCNNSettings(output="m", names="kb", train_dataset=[str(with_dev)], train_split="traindev")).dev_chooses
        is False
    )
