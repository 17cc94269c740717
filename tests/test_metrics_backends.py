"""Metric sinks: W&B offline really logs; a sink that is not installed is named, with its
extra, before any work is done."""

from __future__ import annotations

import re
import sys
import time
from pathlib import Path

import pytest

from uirl_agents.trainers.cli import parse_args
from uirl_agents.trainers.config import GRPOConfig, RSConfig
from uirl_agents.trainers.metrics import MetricsBackendMissingError, MetricsLogger, read_metrics


def test_wandb_offline_run_logs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("wandb")
    monkeypatch.setenv("WANDB_MODE", "offline")
    monkeypatch.setenv("WANDB_DIR", str(tmp_path))
    monkeypatch.setenv("WANDB_SILENT", "true")
    metrics = MetricsLogger(
        tmp_path, ["wandb"], tmp_path / "tb", "offline-test", "uirl", {"seed": 3}
    )
    for step in range(3):
        metrics.log({"rollout/reward_mean": 0.5 * step, "train/loss": float("nan")}, step=step)
    metrics.close()
    # The offline run file holds the records `wandb sync` would upload (protobuf);
    # W&B's service process writes it behind finish(), so wait for it (bounded).
    (run_file,) = (tmp_path / "wandb").glob("offline-run-*/run-*.wandb")
    deadline = time.monotonic() + 60
    while b"offline-test" not in (records := run_file.read_bytes()):
        assert time.monotonic() < deadline, f"{run_file}: {len(records)} bytes after 60 s"
        time.sleep(0.1)
    assert b"rollout/reward_mean" in records and b"offline-test" in records
    assert b"train/loss" not in records  # NaN is never sent
    assert [r["step"] for r in read_metrics(tmp_path)] == [0, 1, 2]


@pytest.fixture
def no_wandb(monkeypatch: pytest.MonkeyPatch) -> None:
    """``import wandb`` fails, as on a machine without the extra."""
    monkeypatch.setitem(sys.modules, "wandb", None)


@pytest.mark.usefixtures("no_wandb")
def test_missing_wandb_names_the_extra(tmp_path: Path) -> None:
    fix = "pip install -e '.[wandb]'"
    with pytest.raises(MetricsBackendMissingError, match=re.escape(fix)):
        MetricsLogger(tmp_path, ["tensorboard", "wandb"], tmp_path / "tb", "r", "uirl", {})
    # Checked before any sink is opened: no TensorBoard files, no metrics file.
    assert list(tmp_path.iterdir()) == []


@pytest.mark.usefixtures("no_wandb")
@pytest.mark.parametrize("cls", [RSConfig, GRPOConfig], ids=["rs", "grpo"])
def test_missing_wandb_fails_at_the_command_line(
    cls: type, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """docs/training.md's ``--logging.report_to '[tensorboard, wandb]'``: the scripts stop
    while parsing arguments, before any session or model."""
    argv = ["--output-dir", str(tmp_path), "--logging.report_to", "[tensorboard, wandb]"]
    with pytest.raises(SystemExit) as exc:
        parse_args(cls, argv, "test")
    assert exc.value.code == 2
    assert "pip install -e '.[wandb]'" in capsys.readouterr().err
    assert list(tmp_path.iterdir()) == []
