"""Train a VLM on a uirl task with TRL's GRPOTrainer: screenshots every turn, pixel actions as tools.

    python scripts/train_trl.py --config scripts/configs/trl_tiny_cpu.yaml --output-dir runs/trl
    accelerate launch --num_processes 8 scripts/train_trl.py --config CONFIG --output-dir DIR

The whole recipe is TRL's ``GRPOConfig`` (the config's ``grpo`` section), uirl's
environment class (``environment``: uirl_agents/integrations/trl.py, given the model's
processor and ``grpo.max_completion_length``, so that every screenshot it returns fits
the completion and is trained; ``turn_tokens`` there caps each model turn) and a
dataset of task seeds (``dataset``). Generation blocks the vision special tokens. The model is a checkpoint, or ``tiny-<family>`` (built
offline into the output dir; ``tool_call_cold_start`` then teaches it the tool-call
syntax first). TRL writes its usual ``trainer_state.json`` and checkpoints to the
output dir; every browser session is closed at the end, also after Ctrl-C.
"""

from __future__ import annotations

import argparse
import logging
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

import yaml

os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")

logger = logging.getLogger("train_trl")


def load_model(name: str, output_dir: Path) -> tuple[Any, Any]:
    """The model and its processor, ready for tool calling (``tiny-<family>``: built here)."""
    from uirl_agents.integrations.tool_templates import use_tool_chat_template
    from uirl_agents.loading.pretrained import load_model_and_processor
    from uirl_agents.testing.tiny_model import build_tiny_model, tiny_family

    family = tiny_family(name)
    if family is not None:
        path = output_dir / f"tiny-{family}"
        if not path.exists():
            output_dir.mkdir(parents=True, exist_ok=True)
            # Every process builds the same (seeded) model aside and renames it into
            # place; the first rename wins, so no process reads a half-written folder.
            aside = Path(tempfile.mkdtemp(dir=output_dir, prefix=f".tiny-{family}-"))
            build_tiny_model(family, aside)
            try:
                aside.rename(path)
            except OSError:  # another process's copy is in place
                shutil.rmtree(aside)
        name = str(path)
    model, processor = load_model_and_processor(name, device="cpu")
    return model, use_tool_chat_template(processor)


def build_trainer(config: dict[str, Any], output_dir: Path) -> Any:
    """TRL's GRPOTrainer with uirl's environment, from a config like trl_tiny_cpu.yaml."""
    from transformers import set_seed
    from trl import GRPOConfig, GRPOTrainer

    from uirl_agents.integrations.tool_warmup import teach_tool_calls
    from uirl_agents.integrations.trl import log_episode_metrics, make_environment, seed_dataset

    set_seed(config.get("seed", 0))
    model, processor = load_model(config["model"], output_dir)
    grpo = dict(config["grpo"])
    environment = dict(config.get("environment", {}))
    if "screenshot_size" in environment:
        environment["screenshot_size"] = tuple(environment["screenshot_size"])
    # The class keeps the run's token budget: it sizes screenshots as the processor does,
    # refuses max_steps that do not fit, and ends an episode before TRL would drop a
    # tool result; generation stops each turn where the budget counts it to.
    max_completion_length = grpo.get("max_completion_length", GRPOConfig.max_completion_length)
    env_class = make_environment(
        **environment, processor=processor, max_completion_length=max_completion_length
    )
    grpo["generation_kwargs"] = {
        **env_class.generation_kwargs(use_vllm=bool(grpo.get("use_vllm", False))),
        **(grpo.get("generation_kwargs") or {}),
    }
    cold_start = config.get("tool_call_cold_start")
    if cold_start:
        probe = env_class()
        losses = teach_tool_calls(
            model, processor, probe, cold_start["calls"], steps=cold_start["steps"]
        )
        probe._close()
        logger.info(
            "tool-call cold start: %d steps, loss %.3f -> %.3f", len(losses), losses[0], losses[-1]
        )
    peft_config = None
    if config.get("peft"):
        from peft import LoraConfig

        peft_config = LoraConfig(**config["peft"])
    args = GRPOConfig(output_dir=str(output_dir), seed=config.get("seed", 0), **grpo)
    return GRPOTrainer(
        model=model,
        processing_class=processor,
        args=args,
        train_dataset=seed_dataset(**config.get("dataset", {"num_rows": 64})),
        reward_funcs=[log_episode_metrics],
        environment_factory=env_class,
        peft_config=peft_config,
    )


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--config", type=Path, required=True, help="a YAML file like trl_tiny_cpu.yaml"
    )
    parser.add_argument("--output-dir", type=Path, required=True, help="where TRL writes the run")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s: %(message)s")
    config = yaml.safe_load(args.config.read_text())
    args.output_dir.mkdir(parents=True, exist_ok=True)

    from uirl_agents.integrations.trl import close_environments

    try:
        trainer = build_trainer(config, args.output_dir)
        trainer.train()
        trainer.save_model(str(args.output_dir))
        trainer.save_state()  # trainer_state.json: the logged metrics of every step
    finally:
        closed = close_environments()
        logger.info("closed %d browser sessions", closed)


if __name__ == "__main__":
    main()
