"""The format a model speaks, picked from its config when none is given; ``format=``
still overrides it."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from uirl_agents.evaluation.agents import build_policy, parse_agent
from uirl_agents.formats import infer_format

pytest_plugins = ["model_fixtures"]


@pytest.mark.parametrize(
    ("name", "model_type", "config_text", "expected"),
    [
        ("ByteDance-Seed/UI-TARS-1.5-7B", "qwen2_5_vl", "", "ui-tars"),
        ("/models/finetuned", "qwen2_5_vl", '{"_name_or_path": "ui_tars_15"}', "ui-tars"),
        ("Qwen/Qwen2.5-VL-3B-Instruct", "qwen2_5_vl", "", "qwen2.5-vl"),
        ("/models/tiny", "qwen2_vl", "", "qwen2.5-vl"),
        ("qwen2.5-vl-3b", None, "", "qwen2.5-vl"),  # a served model: its name only
        ("ui-tars-1.5-7b", None, "", "ui-tars"),
    ],
)
def test_infer_format(name: str, model_type: str | None, config_text: str, expected: str) -> None:
    assert infer_format(name, model_type, config_text) == expected


def test_infer_format_gives_other_models_the_generic_text_format() -> None:
    assert infer_format("/models/llava", "llava") == "text"
    assert infer_format("google/paligemma-3b-mix-448", "paligemma") == "text"


def test_agent_spec_leaves_the_format_to_the_model() -> None:
    assert parse_agent("hf:tiny").format is None
    assert parse_agent("hf:tiny,format=ui-tars").format == "ui-tars"


@pytest.fixture
def ui_tars_copy(tiny_qwen25vl_dir: Path, tmp_path: Path) -> Path:
    """The tiny model as a UI-TARS fine-tune would save it (its config names UI-TARS)."""
    copy = shutil.copytree(tiny_qwen25vl_dir, tmp_path / "finetuned")
    config = json.loads((copy / "config.json").read_text())
    config["_name_or_path"] = "ByteDance-Seed/UI-TARS-1.5-7B"
    (copy / "config.json").write_text(json.dumps(config))
    return copy


def test_detect_format_from_the_checkpoint(tiny_qwen25vl_dir: Path, ui_tars_copy: Path) -> None:
    from uirl_agents.loading.pretrained import detect_format

    assert detect_format(tiny_qwen25vl_dir) == "qwen2.5-vl"  # a Qwen2.5-VL model
    assert detect_format(ui_tars_copy) == "ui-tars"


def test_hf_policy_picks_and_overrides(tiny_qwen25vl_dir: Path, ui_tars_copy: Path) -> None:
    from uirl_agents.policies.hf import HFPolicy

    assert HFPolicy.from_pretrained(str(tiny_qwen25vl_dir)).format.name == "qwen2.5-vl"
    assert HFPolicy.from_pretrained(str(ui_tars_copy)).format.name == "ui-tars"
    assert HFPolicy.from_pretrained(str(tiny_qwen25vl_dir), "ui-tars").format.name == "ui-tars"


def test_evaluate_reports_the_format(tmp_path: Path) -> None:
    pytest.importorskip("trl")  # the tiny model's chat template

    def oracle(i: int) -> dict:
        raise AssertionError("model agents never ask the oracle")

    _, chosen = build_policy(parse_agent("hf:tiny"), oracle, tmp_path, seed=0)
    assert chosen == "qwen2.5-vl"  # was ui-tars whatever the model
    _, forced = build_policy(parse_agent("hf:tiny,format=ui-tars"), oracle, tmp_path, seed=0)
    assert forced == "ui-tars"
    url = "@http://127.0.0.1:9/v1"
    for model, expected in [("ui-tars-1.5-7b", "ui-tars"), ("qwen2.5-vl-3b", "qwen2.5-vl"),
                            ("mine", "text")]:  # fmt: skip
        policy, chosen = build_policy(parse_agent(f"openai:{model}{url}"), oracle, tmp_path, 0)
        policy.close()
        assert chosen == expected, model
