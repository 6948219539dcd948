import pytest

from bioel_core.linking.nil import ROUNDING_MARGIN, calibrate_threshold


def test_threshold_maximizes_f1_over_kept_predictions():
    # scores 0.9 (right), 0.8 (right), 0.7 (wrong), 0.6 (wrong), 0.5 (right); 4 gold annotations
    # keep >= 0.9: P 1, R 1/4 -> F1 0.4; >= 0.8: P 1, R 2/4 -> 0.667; >= 0.7: 2/3, 2/4 -> 0.571;
    # >= 0.6: 2/4, 2/4 -> 0.5; >= 0.5: 3/5, 3/4 -> 0.667 (ties 0.8: the lower threshold keeps more)
    t = calibrate_threshold([0.6, 0.9, 0.5, 0.8, 0.7], [False, True, True, True, False], gold=4)
    assert t.threshold == 0.5 - ROUNDING_MARGIN  # everything kept: a margin below the lowest score
    assert (t.kept, t.predictions, t.gold) == (5, 5, 4)
    assert t.f1 == pytest.approx(2 / 3) and t.f1_without_threshold == pytest.approx(2 / 3)
    t = calibrate_threshold([0.9, 0.8, 0.7, 0.6, 0.5], [True, True, False, False, False], gold=4)
    assert (t.threshold, t.kept) == (pytest.approx(0.75), 2)  # midway between 0.8 kept and 0.7 cut
    assert t.precision == 1.0 and t.recall == 0.5 and t.f1_without_threshold == pytest.approx(2 * 0.4 * 0.5 / 0.9)


def test_equal_scores_are_kept_or_cut_together():
    t = calibrate_threshold([0.7, 0.7, 0.4], [True, False, False], gold=1)
    assert t.threshold == pytest.approx(0.55) and t.kept == 2  # cannot keep just one of the two 0.7s


def test_a_score_a_rounding_away_from_the_calibrated_ones_keeps_their_side_of_the_threshold():
    """The mentions calibrated on, scored again with other rounding (a GPU, FAISS's float32 vectors: within about
    1e-7), stay kept or cut: the threshold is no score of theirs."""
    import numpy as np

    scores = [float(np.float32(v)) for v in (0.91, 0.7540059, 0.7540057, 0.52)]
    t = calibrate_threshold(scores, [True, True, False, False], gold=2)
    assert t.kept == 2 and scores[2] < t.threshold < scores[1]
    for kept, score in zip([True, True, False, False], scores):
        for other in (np.nextafter(np.float32(score), np.float32(0)), np.nextafter(np.float32(score), np.float32(1))):
            assert (float(other) >= t.threshold) == kept
    # two adjacent floats have nothing between them: the lowest kept score is the threshold
    low = float(np.nextafter(0.6, 0.0))
    assert calibrate_threshold([0.6, low], [True, False], gold=1).threshold == 0.6
    # all kept: a margin below the lowest, never below 0 for scores that are probabilities
    assert calibrate_threshold([0.9, 0.5], [True, True], gold=2).threshold == 0.5 - ROUNDING_MARGIN
    assert calibrate_threshold([0.9, 4e-7], [True, True], gold=2).threshold == 0.0
    assert calibrate_threshold([0.9, -0.2], [True, True], gold=2).threshold == -0.2 - ROUNDING_MARGIN


def test_bad_calibration_input_is_refused():
    with pytest.raises(ValueError, match="scores but"):
        calibrate_threshold([0.1], [True, False], gold=1)
    with pytest.raises(ValueError, match="at least one"):
        calibrate_threshold([], [], gold=3)


def test_the_printed_threshold_keeps_the_prediction_it_was_calibrated_on():
    """calibrate-nil prints the `--nil-threshold` to paste; rounded to 4 places it sat above the float32 score it was
    chosen at, and that prediction (the last kept) was cut."""
    import numpy as np

    from pipelines.cli_link import nil_threshold_flags

    scores = [float(np.float32(0.73456)), float(np.float32(0.61))]
    calibrated = {"Disease": calibrate_threshold(scores, [True, False], gold=1)}
    pasted = float(nil_threshold_flags(calibrated).split("=")[1])
    assert pasted == calibrated["Disease"].threshold and scores[0] >= pasted
