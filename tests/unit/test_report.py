"""The report's loss chart: the train loss raw and smoothed, and the validation points, on one chart."""
import numpy as np
import pytest

from coppelius.report import loss_plot, sample_section, smoothed, summary


def test_smoothing_follows_a_constant_and_lags_a_step_without_start_up_bias():
    assert smoothed([2.0] * 5) == pytest.approx([2.0] * 5, rel=1e-12)  # bias-corrected: no dip towards 0 at first
    values = smoothed([4.0] * 10 + [1.0] * 10)
    assert values[9] == pytest.approx(4.0, rel=1e-12) and 1.0 < values[10] < 4.0 and 1.0 < values[-1] < values[10]


def test_the_chart_draws_raw_smoothed_and_validation(tmp_path):
    record = {"target": "cpu", "tokens_per_second": 1000.0, "validation": {"contexts": 4, "points": [
        {"t": 10, "loss": 3.0}, {"t": 20, "loss": 2.5}]},
              "steps": [{"t": t, "loss": 5.0 - 0.1 * t + 0.2 * np.sin(t), "skipped": False} for t in range(1, 21)]}
    loss_plot(record, str(tmp_path / "loss.png"))
    assert (tmp_path / "loss.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_a_sampled_control_byte_is_shown_as_its_picture():
    lines = sample_section(b"def f():\n\treturn 1\x00\x1b[0m\n", {"model": {"vocab": 256}})
    text = "\n".join(lines)
    assert "def f():\n\treturn 1\u2400\u241b[0m" in text and not any(ord(c) < 32 and c not in "\n\t" for c in text)


def test_a_last_loss_above_the_first_is_said_to_be_above_it_not_a_negative_percent_below():
    """A resumed run whose last step's loss is higher than its first: the summary said '(-42.1% below the first)'."""
    plan = {"model": {"vocab": 256, "context": 64, "width": 64, "layers": 2, "heads": 4, "parameters": 1},
            "run": {"tokens_per_step": 1024}}
    train = {"target": "cpu", "skipped": 0, "epoch": 0, "tokens": {"count": 9000}, "status": "completed",
             "published": [], "steps": [{"t": 1, "loss": 2.0}, {"t": 2, "loss": 2.5}]}
    evaluation = {"mean_loss": 2.0, "predict": [{"context": 0, "loss": 2.0}]}
    assert "| last step's train loss | 2.5000 (25.0% above the first) |" in summary(train, evaluation, plan)
    train["steps"][1]["loss"] = 1.5
    assert "| last step's train loss | 1.5000 (25.0% below the first) |" in summary(train, evaluation, plan)
