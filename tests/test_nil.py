import pytest

from bioel_core.linking.nil import calibrate_threshold


def test_threshold_maximizes_f1_over_kept_predictions():
    # scores 0.9 (right), 0.8 (right), 0.7 (wrong), 0.6 (wrong), 0.5 (right); 4 gold annotations
    # keep >= 0.9: P 1, R 1/4 -> F1 0.4; >= 0.8: P 1, R 2/4 -> 0.667; >= 0.7: 2/3, 2/4 -> 0.571;
    # >= 0.6: 2/4, 2/4 -> 0.5; >= 0.5: 3/5, 3/4 -> 0.667 (ties 0.8: the lower threshold keeps more)
    t = calibrate_threshold([0.6, 0.9, 0.5, 0.8, 0.7], [False, True, True, True, False], gold=4)
    assert t.threshold == pytest.approx(0.5)
    assert (t.kept, t.predictions, t.gold) == (5, 5, 4)
    assert t.f1 == pytest.approx(2 / 3) and t.f1_without_threshold == pytest.approx(2 / 3)
    t = calibrate_threshold([0.9, 0.8, 0.7, 0.6, 0.5], [True, True, False, False, False], gold=4)
    assert (t.threshold, t.kept) == (pytest.approx(0.8), 2)
    assert t.precision == 1.0 and t.recall == 0.5 and t.f1_without_threshold == pytest.approx(2 * 0.4 * 0.5 / 0.9)


def test_equal_scores_are_kept_or_cut_together():
    t = calibrate_threshold([0.7, 0.7, 0.4], [True, False, False], gold=1)
    assert t.threshold == pytest.approx(0.7) and t.kept == 2  # cannot keep just one of the two 0.7s


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
