"""Trainer configs: dataclasses with help on every field, loaded from YAML + command line.

One dataclass per trainer (:class:`RSConfig`, :class:`GRPOConfig`, :class:`PPOConfig`),
each composed of the shared sections (:class:`ModelConfig`, :class:`EnvConfig`,
:class:`RolloutConfig`, :class:`OptimConfig`, :class:`LoggingConfig`,
:class:`CheckpointConfig`, :class:`EvalConfig`, :class:`HubConfig`) plus one section of
its own (``rs`` / ``grpo`` / ``ppo``; GRPO's and PPO's share the clipped surrogate's
fields, :class:`SurrogateSection`). A YAML file may hold every trainer's section: each
trainer ignores the others'. A GRPO config's ``algorithm: ppo`` (PPO with the grpo
section's surrogate fields) is deprecated: :data:`PPO_SPELLING`.

The help text lives once, in each field's ``metadata["help"]``; the command line
(``--section.field VALUE``), ``--help`` and the table in docs/training.md all read it
from there (:mod:`uirl_agents.trainers.cli`).

>>> cfg = GRPOConfig(model=ModelConfig(lora_rank=0))
>>> cfg.optim.learning_rate  # None resolves by the kind of fine-tuning
1e-05
"""

from __future__ import annotations

import copy
import logging
import typing
import warnings
from dataclasses import MISSING, dataclass, field, fields
from typing import Any, Literal

from uirl_agents.loading.quantization import quantization_mode
from uirl_gym.actions import check_screen
from uirl_gym.make import DENSE_ON_OPENENV, RuntimeSettings

logger = logging.getLogger(__name__)

# LoRA on the language model's linear layers only. A plain list of names (q_proj, ...,
# gate_proj, up_proj, down_proj) also matches the vision tower's MLP blocks in
# Qwen2.5-VL; anchoring on `language_model` keeps the vision tower frozen and untouched.
LoraPreset = Literal["attention", "mlp", "attention+mlp", "all-linear", "custom"]
LORA_LEARNING_RATE = 2e-4
FULL_FINETUNE_LEARNING_RATE = 1e-5
TINY_MODEL = "tiny"
TINY_MODEL_DIR = "tiny_model"  # where `model.name: tiny` is built, in OUTPUT_DIR
# The truncation of the importance weight asynchronous GRPO applies when grpo.tis_cap is unset.
ASYNC_TIS_CAP = 2.0
# ... and the one vLLM rollouts get (TRL's vllm_importance_sampling_clip_max).
VLLM_TIS_CAP = 3.0


def param(default: Any = MISSING, *, help: str, factory: Any = MISSING) -> Any:
    """A dataclass field with its help text (the one place it is written)."""
    if factory is not MISSING:
        return field(default_factory=factory, metadata={"help": help})
    return field(default=default, metadata={"help": help})


# ---- shared sections ------------------------------------------------------------------


@dataclass
class ModelConfig:
    """The policy model and what of it is trained."""

    name: str = param(
        "Qwen/Qwen2.5-VL-3B-Instruct",
        help=f"Checkpoint folder or Hub id (AutoModelForImageTextToText). `{TINY_MODEL}`: "
        "build the tiny random Qwen2.5-VL into OUTPUT_DIR/tiny_model (CPU smoke runs).",
    )
    format: Literal["qwen2.5-vl", "ui-tars", "text", "json", "coordinates"] = param(
        "qwen2.5-vl",
        help="Prompt and output format: the model family's own (qwen2.5-vl, ui-tars) or a "
        "generic one for other models (text, json, coordinates; docs/agents.md).",
    )
    adapter_path: str | None = param(
        None, help="A LoRA adapter folder to start from (trained further); None: a fresh one."
    )
    lora_rank: int = param(16, help="LoRA rank; 0 trains all weights (full fine-tuning).")
    lora_alpha: int = param(32, help="LoRA scaling numerator (scale = alpha / rank).")
    lora_dropout: float = param(
        0.0,
        help="LoRA dropout. Keep 0 for GRPO: dropout makes the loss pass's logprobs differ "
        "from the rollout's, so the PPO ratio is not 1 on-policy.",
    )
    lora_preset: LoraPreset = param(
        "attention+mlp",
        help="Which layers of the language model get LoRA, resolved per model family: "
        "attention (q, k, v, o), mlp (gate, up, down), attention+mlp, all-linear, or "
        "custom (lora_target_modules). The vision tower is never wrapped by a preset.",
    )
    lora_target_modules: str | None = param(
        None,
        help="With lora_preset: custom, the modules that get LoRA: a regex (peft fullmatch) "
        "or a comma-separated list of module names.",
    )
    lora_modules_to_save: list[str] = param(
        factory=list,
        help="Modules trained in full next to the adapter and saved with it (peft "
        "modules_to_save), e.g. [lm_head]; the tiny random model needs its lm_head.",
    )
    dtype: Literal["auto", "bfloat16", "float16", "float32"] = param(
        "auto",
        help="Compute dtype; auto: bfloat16 on GPU, float32 on CPU. With LoRA the frozen base "
        "weights are stored in it (the adapter and lora_modules_to_save stay float32, the "
        "latter with forward passes under autocast); full fine-tuning keeps float32 master "
        "weights and runs forward passes under autocast to it (mixed precision).",
    )
    load_in_8bit: bool = param(
        False,
        help="Load the language model's weights in 8 bits (bitsandbytes LLM.int8, the quant "
        "extra) for rollouts, evaluation and LoRA training on top; needs lora_rank > 0.",
    )
    load_in_4bit: bool = param(
        False,
        help="Load the language model's weights in 4 bits (NF4, double quantization; "
        "bitsandbytes, the quant extra): QLoRA. Needs lora_rank > 0, not with fsdp.",
    )
    freeze_vision_tower: bool = param(
        True,
        help="Full fine-tuning: leave the vision encoder's weights frozen (LoRA never "
        "touches it unless a custom lora_target_modules names it).",
    )
    attn_implementation: str | None = param(
        None, help="e.g. sdpa, flash_attention_2, eager; None: transformers' default."
    )
    gradient_checkpointing: bool = param(
        False, help="Recompute activations in the backward pass (less memory, ~30% slower)."
    )
    fsdp: bool = param(
        False,
        help="Shard weights, gradients and optimizer state over the processes (FSDP2), for "
        "models whose full fine-tuning does not fit one GPU; also on when launched with "
        "scripts/configs/accelerate/fsdp.yaml. Rollouts gather the whole model (docs/training.md).",
    )


@dataclass
class EnvConfig(RuntimeSettings):
    """The sessions each process runs (where: ``runtime`` and its fields, from
    :class:`~uirl_gym.make.RuntimeSettings`) and the task instances they get."""

    num_envs: int = param(4, help="Sub-envs (browser sessions) per process.")
    tasks: dict[str, float] | None = param(
        None,
        help="Task id -> sampling weight: each task instance (a GRPO group) draws its task "
        "(docs/tasks.md); None: simple_data_entry only.",
    )
    task_options: dict[str, dict[str, Any]] | None = param(
        None,
        help="Task id -> reset options of that task's episodes, as documented on its page "
        "(docs/tasks/<task>.md), e.g. simple_data_entry: {rows: [2]}, form_fill: "
        "{num_fields: 4}.",
    )
    task_seed: int | None = param(
        None,
        help="Every training episode uses this task seed (one fixed sheet); None: a new seed "
        "per task instance. Evaluation seeds stay held out either way.",
    )
    max_steps: int = param(30, help="An episode still running after this many steps ends.")
    reward_mode: Literal["sparse", "dense"] = param(
        "sparse", help="sparse: submissions only; dense: plus field/cell shaping (docs/env.md)."
    )
    image_format: Literal["png", "jpeg", "raw"] = param(
        "png", help="How screenshots travel from the session server (the env's default)."
    )
    screen_size: list[int] | None = param(
        None,
        help="The sessions' screen [width, height]; None: 1280x800. [160, 210]: MiniWoB++'s "
        "task area as the whole screen (docs/tasks.md).",
    )


@dataclass
class RolloutConfig:
    """How episodes are collected."""

    episodes_per_iteration: int = param(
        64, help="Episodes per iteration, over all processes (groups x group_size)."
    )
    group_size: int = param(
        8, help="Episodes per task instance (same seed and options): the GRPO group G."
    )
    temperature: float = param(1.0, help="Sampling temperature (also scales the logprobs).")
    top_p: float = param(1.0, help="Nucleus sampling mass; 1.0: off.")
    max_new_tokens: int = param(256, help="Longest completion per step.")
    max_images: int = param(1, help="Screenshots in the prompt (latest ones, current included).")
    max_history: int | None = param(
        None, help="Earlier outputs kept as assistant turns; None: all of the episode's."
    )
    backend: Literal["hf", "vllm"] = param(
        "hf",
        help="hf: generate with the trained model in-process; vllm: an OpenAI-compatible "
        "vLLM server (--enable-lora) that loads each new adapter (docs/training.md).",
    )
    vllm_base_url: str = param(
        "http://127.0.0.1:8000/v1", help="The vLLM server's API root (backend: vllm)."
    )
    vllm_adapter_dir: str | None = param(
        None,
        help="Where the server reads adapters (a shared folder); None: OUTPUT_DIR/vllm_adapters.",
    )
    mode: Literal["sync", "async"] = param(
        "sync",
        help="sync: collect, then update, in turn; async: an actor thread per process "
        "collects the next iterations with weights at most max_staleness updates old while "
        "the learner trains (docs/training.md, Asynchronous rollouts).",
    )
    max_staleness: int = param(
        1,
        help="mode async: the actor starts iteration i only once the learner has done "
        "i - max_staleness updates, so no iteration is trained with weights older than that.",
    )
    extra_body: dict[str, Any] = param(
        factory=dict,
        help="Fields merged into every vLLM request after the sampling fields (which are all "
        "sent: temperature, top_p, top_k -1, min_p 0, repetition_penalty 1, ...), e.g. "
        "{top_k: 20}.",
    )


@dataclass
class OptimConfig:
    """The optimiser and how the iteration's data is batched."""

    learning_rate: float | None = param(
        None,
        help=f"AdamW learning rate; None: {LORA_LEARNING_RATE} with LoRA, "
        f"{FULL_FINETUNE_LEARNING_RATE} for full fine-tuning.",
    )
    weight_decay: float = param(0.0, help="AdamW weight decay.")
    epochs: int = param(1, help="Passes over each iteration's data.")
    micro_batch_tokens: int = param(
        16384, help="Token budget of one forward/backward (padded prompt + completion tokens)."
    )
    grad_accumulation_steps: int = param(
        1,
        help="Micro-batches accumulated into one optimizer step, on the process with the most "
        "(it sets the number of steps; every process deals its data out over all of them).",
    )
    max_grad_norm: float = param(1.0, help="Clip the global gradient norm to this; 0: no clipping.")
    sort_by_length: bool = param(
        True,
        help="Cut the micro-batches of the scoring pass and of each optimizer step from their "
        "samples sorted by length, longest first: less padding, the same logprobs and steps.",
    )
    cache_image_features: bool = param(
        True,
        help="Run each distinct image of an iteration through the vision tower once and reuse "
        "its features in the scoring pass and every epoch (Qwen2-VL / Qwen2.5-VL with the "
        "tower frozen; otherwise the pixels are encoded in every pass, as with false).",
    )
    lr_scheduler: Literal["constant", "constant_with_warmup", "linear", "cosine"] = param(
        "constant",
        help="Learning-rate schedule over iterations (transformers' schedules after the "
        "warm-up), stepped once per iteration and saved with checkpoints.",
    )
    warmup_iterations: int = param(
        0,
        help="Iterations over which the learning rate rises linearly: iteration i < W runs at "
        "(i + 1) / (W + 1) of it (none at 0). Not with lr_scheduler: constant.",
    )


@dataclass
class LoggingConfig:
    """Where metrics go."""

    report_to: list[Literal["tensorboard", "wandb"]] = param(
        factory=lambda: ["tensorboard"], help="Metric sinks; wandb is imported only when listed."
    )
    log_dir: str | None = param(None, help="TensorBoard folder; None: OUTPUT_DIR/tb.")
    wandb_project: str = param("uirl", help="W&B project (report_to: wandb).")
    run_name: str | None = param(None, help="Run name for W&B; None: the output folder's name.")
    save_trajectories: bool = param(
        True, help="Write every episode to OUTPUT_DIR/trajectories/iter_N/rank_R."
    )
    progress: bool = param(True, help="Show tqdm progress bars.")


@dataclass
class CheckpointConfig:
    """When the run saves itself (for resuming and for serving)."""

    every: int = param(1, help="Save after every N iterations (and after the last one).")
    keep_last: int = param(2, help="Checkpoints kept; older ones are deleted.")


@dataclass
class EvalConfig:
    """Evaluation on held-out task seeds (never used for training)."""

    episodes: int = param(16, help="Evaluation episodes, over all processes; 0: no evaluation.")
    every: int = param(1, help="Evaluate after every N iterations.")
    at_start: bool = param(True, help="Also evaluate before the first iteration (step 0).")
    max_steps: int | None = param(None, help="Episode step limit; None: env.max_steps.")
    temperature: float = param(0.0, help="Sampling temperature; 0: greedy decoding.")


@dataclass
class HubConfig:
    """Sharing the result on the Hugging Face Hub when the run ends (uirl_agents.trainers.push)."""

    repo_id: str | None = param(
        None,
        help="Push the final adapter (or weights), the processor, this config and a model "
        "card to this Hub repo (user/name) when the run ends; None: no push. The command "
        "line's --push-to-hub REPO sets it. Token: HF_TOKEN or `hf auth login`.",
    )
    merged: bool = param(
        False,
        help="Push the base model with the adapter merged in (full weights, in the run's "
        "dtype, merged into an unquantized base), not the adapter alone.",
    )
    private: bool = param(False, help="Create the repo private (an existing repo is kept as is).")
    results_dir: str | None = param(
        None,
        help="An evaluate.py --out folder whose results table goes in the model card; "
        "None: OUTPUT_DIR's results.md when there is one.",
    )


# ---- trainer sections -------------------------------------------------------------------


@dataclass
class RSSection:
    """Expert iteration (rejection sampling + SFT)."""

    reward_threshold: float = param(
        1.0, help="Keep episodes whose total reward is at least this for fine-tuning."
    )
    expert_episodes: int = param(
        0,
        help="Cold start: scripted-expert demonstrations (in the model's format) added to "
        "iteration 0's data, over all processes.",
    )
    expert_mode: Literal["type", "copy_paste"] = param(
        "type",
        help="How SimpleDataEntry's expert fills fields: type the value, or copy-paste the "
        "cell (other tasks' experts have one way).",
    )
    drop_unparsed_steps: bool = param(
        True,
        help="Leave out the steps of kept episodes whose output did not parse into an "
        "action (they would teach the format's mistakes).",
    )
    demonstrations: list[str] = param(
        factory=list,
        help="Demonstrations whose episodes join iteration 0's data, shared out over the "
        "processes: run directories (recorded with `python -m uirl_agents.recorder`, or "
        "any run's), exported datasets (`python -m uirl_agents.dataset export`) or Hub "
        "datasets (hf://datasets/USER/NAME); each step is written afresh in model.format "
        "(any recording format works). rs.reward_threshold applies to them as to any episode.",
    )


@dataclass
class SurrogateSection:
    """The clipped surrogate's settings, GRPO's and PPO's (each in its own section)."""

    clip_epsilon: float = param(0.2, help="PPO clip range: ratio clipped to [1-eps, 1+eps].")
    kl_beta: float = param(
        0.0,
        help="Weight of the k3 KL to the reference: the starting policy (the base model, or "
        "model.adapter_path's adapter when the run starts from one).",
    )
    tis_cap: float | None = param(
        None,
        help="Truncated importance sampling: weight each token's loss by "
        "min(exp(old - rollout logprob), cap), correcting for a rollout engine (vLLM, bf16 "
        "generate) or an actor some updates behind (rollout.mode async) that samples from "
        f"another distribution; None: {VLLM_TIS_CAP} with rollout.backend vllm, "
        f"{ASYNC_TIS_CAP} in async mode, else off.",
    )
    loss_normalization: Literal["token", "episode"] = param(
        "token",
        help="How the loss averages: token, a mean over the iteration's completion tokens "
        "(TRL's loss_type dapo: a long episode weighs as many short ones); episode, a mean "
        "over each episode's tokens, then over episodes (every episode weighs the same, "
        "however long; docs/training.md).",
    )
    negative_advantage_scale: float = param(
        1.0,
        help="Multiply negative advantages by this (1: as computed; 0: train only on what "
        "did better than its baseline: GRPO's episodes above their group's mean, PPO's "
        "steps above their value). Below 1 when failed episodes' off-trajectory tokens "
        "drown the successes' signal (docs/training.md, Learning demo).",
    )


@dataclass
class GRPOSection(SurrogateSection):
    """GRPO over multi-step episodes: the surrogate's settings and the groups'."""

    leave_one_out: bool = param(
        False, help="Baseline: the mean of the group's other episodes (RLOO), not the mean."
    )
    scale_advantages: bool = param(True, help="Divide advantages by the group's reward std.")
    advantage_from: Literal["return", "success"] = param(
        "return",
        help="What a group's advantages compare: each episode's return (its summed rewards), "
        "or its success (1 if the env's is_success, else 0: every failure alike, e.g. "
        "MiniWoB++'s click on nothing (0) and on a wrong button (-1), so that a group "
        "without a success teaches nothing).",
    )
    skip_zero_advantage: bool = param(
        True,
        help="Skip the forward/backward of steps whose advantage is 0 when kl_beta is 0: "
        "they add no gradient, and micro-batches, optimizer steps and the normaliser are "
        "laid out before they are left out, so the update is the same.",
    )
    replay: bool = param(
        False,
        help="Replay of successes (ARPO): in a group without a success, one failure is "
        "replaced by a stored success of the same task instance before advantages; "
        "kept in checkpoints.",
    )
    replay_per_instance: int = param(1, help="Successes kept per task instance (the latest).")
    replay_max_instances: int = param(
        256, help="Task instances the replay keeps (the least recently used are dropped)."
    )


@dataclass
class PPOSection(SurrogateSection):
    """PPO with a value head: the surrogate's settings and the critic's."""

    gamma: float = param(1.0, help="Discount of per-step rewards in GAE.")
    lam: float = param(
        0.95, help="GAE's lambda: 0 one-step TD (low variance), 1 Monte Carlo (no bias)."
    )
    value_coef: float = param(
        0.5, help="Weight of the value loss (per token of the step) next to the policy loss."
    )
    value_clip: float | None = param(
        0.2,
        help="Clip the value's move from its pre-update estimate to +-this in the value "
        "loss (PPO2); None: unclipped squared error.",
    )
    normalize_advantages: bool = param(
        True,
        help="Centre the iteration's step advantages and divide them by their std (over "
        "every process), or by advantage_std_floor when that is larger.",
    )
    advantage_std_floor: float = param(
        0.1,
        help="With normalize_advantages, divide by max(std, this): when almost every "
        "episode ends alike the advantages are the critic's noise, and scaling them to "
        "std 1 made one update wreck the policy (docs/training.md, PPO). In reward units.",
    )


# The surrogate's fields, which a GRPO config's deprecated `algorithm: ppo` reads from its
# grpo section (PPOConfig reads them from its ppo section).
SURROGATE_FIELDS = tuple(f.name for f in fields(SurrogateSection))
# Said when a GRPO config asks for PPO (`algorithm: ppo`, train_grpo.py --algorithm ppo).
PPO_SPELLING = (
    "algorithm: ppo in a GRPO config (scripts/train_grpo.py --algorithm ppo, PPO's loss "
    "read from grpo.*) is deprecated and goes in the next release: run scripts/train_ppo.py "
    "(PPOConfig), which reads all of PPO's settings from its own ppo section: "
    + ", ".join(f"grpo.{name} -> ppo.{name}" for name in SURROGATE_FIELDS)
)


# ---- trainers -------------------------------------------------------------------------


@dataclass
class TrainConfig:
    """What every trainer shares. Use :class:`RSConfig`, :class:`GRPOConfig` or
    :class:`PPOConfig`."""

    iterations: int = param(100, help="Iterations (collect, then update) in the whole run.")
    seed: int = param(0, help="Seeds models, sampling and the task instances of each iteration.")
    model: ModelConfig = param(factory=ModelConfig, help="The policy model.")
    env: EnvConfig = param(factory=EnvConfig, help="Sessions and tasks.")
    rollout: RolloutConfig = param(factory=RolloutConfig, help="Episode collection.")
    optim: OptimConfig = param(factory=OptimConfig, help="Optimisation.")
    logging: LoggingConfig = param(factory=LoggingConfig, help="Metrics.")
    checkpoint: CheckpointConfig = param(factory=CheckpointConfig, help="Checkpoints.")
    eval: EvalConfig = param(factory=EvalConfig, help="Evaluation.")
    hub: HubConfig = param(factory=HubConfig, help="Sharing on the Hub.")

    # Sections of the other trainers, accepted (and ignored) in a shared YAML file.
    ignored_sections: typing.ClassVar[tuple[str, ...]] = ()

    def __post_init__(self) -> None:
        """The cross-field checks, section by section (``ValueError`` naming the fix)."""
        m, o = self.model, self.optim
        if o.learning_rate is None:  # derived once, here, and logged with the config
            o.learning_rate = LORA_LEARNING_RATE if m.lora_rank > 0 else FULL_FINETUNE_LEARNING_RATE
        _check(self.iterations >= 1, "iterations", ">= 1", self.iterations)
        _check_model(m)
        _check_env(self.env)
        _check_rollout(self.rollout, m)
        _check_optim(o)
        c, e = self.checkpoint, self.eval
        _check(c.every >= 1, "checkpoint.every", ">= 1", c.every)
        _check(c.keep_last >= 1, "checkpoint.keep_last", ">= 1", c.keep_last)
        _check(e.episodes >= 0, "eval.episodes", ">= 0", e.episodes)
        _check(e.every >= 1, "eval.every", ">= 1", e.every)
        _check(e.temperature >= 0, "eval.temperature", ">= 0", e.temperature)

    @property
    def eval_max_steps(self) -> int:
        return self.eval.max_steps or self.env.max_steps

    @property
    def trains_value_head(self) -> bool:
        """The run trains a value head next to the policy (PPO)."""
        return False


ConfigT = typing.TypeVar("ConfigT", bound=TrainConfig)


def config_as(config: TrainConfig, kind: type[ConfigT]) -> ConfigT:
    """``config`` as its trainer's own class (``config_as(run.config, RSConfig).rs``): a
    :class:`~uirl_agents.trainers.run.TrainingRun` holds the shared :class:`TrainConfig`.

    Raises:
        TypeError: ``config`` is another trainer's.
    """
    if not isinstance(config, kind):
        raise TypeError(f"expected a {kind.__name__}, got a {type(config).__name__}")
    return config


def check_world_size(config: TrainConfig, world_size: int) -> None:
    """The iteration's groups and the evaluation episodes split evenly over the processes.

    Raises:
        ValueError: they do not (the message says what to set).
    """
    r, e = config.rollout, config.eval
    per = world_size * r.group_size
    if r.episodes_per_iteration % per:
        raise ValueError(
            f"rollout.episodes_per_iteration = {r.episodes_per_iteration} must split into "
            f"whole groups of {r.group_size} on each of {world_size} processes: set it "
            f"to a multiple of {per}"
        )
    if e.episodes % world_size:
        raise ValueError(
            f"eval.episodes = {e.episodes} must split evenly over {world_size} "
            f"processes: set it to a multiple of {world_size}"
        )


@dataclass
class RSConfig(TrainConfig):
    """Expert iteration: the shared sections + ``rs``."""

    rs: RSSection = param(factory=RSSection, help="Expert iteration.")
    ignored_sections: typing.ClassVar[tuple[str, ...]] = ("grpo", "ppo")

    def __post_init__(self) -> None:
        super().__post_init__()
        _check(self.rs.expert_episodes >= 0, "rs.expert_episodes", ">= 0", self.rs.expert_episodes)
        if self.rs.expert_episodes and not self.env.has_oracle:
            raise ValueError(
                "rs.expert_episodes: the scripted expert reads the task's oracle, which an "
                "OpenEnv server keeps to itself: set rs.expert_episodes: 0 with env.runtime "
                "openenv (or record demonstrations elsewhere: rs.demonstrations)"
            )
        _check_demonstrations(self.rs.demonstrations)


@dataclass
class PPOConfig(TrainConfig):
    """PPO (``scripts/train_ppo.py``): the shared sections + ``ppo``."""

    algorithm: Literal["ppo"] = param(
        "ppo",
        help="Always ppo: names the algorithm in the saved config (a GRPO config's "
        "algorithm: ppo is the deprecated spelling of this config).",
    )
    ppo: PPOSection = param(factory=PPOSection, help="PPO.")
    ignored_sections: typing.ClassVar[tuple[str, ...]] = ("rs", "grpo")

    @property
    def trains_value_head(self) -> bool:
        return True

    def __post_init__(self) -> None:
        super().__post_init__()
        p = self.ppo
        _check_surrogate(p, "ppo", self)
        _check(0 <= p.gamma <= 1, "ppo.gamma", "in [0, 1]", p.gamma)
        _check(0 <= p.lam <= 1, "ppo.lam", "in [0, 1]", p.lam)
        _check(p.value_coef >= 0, "ppo.value_coef", ">= 0", p.value_coef)
        if p.value_clip is not None:
            _check(p.value_clip > 0, "ppo.value_clip", "> 0 (or null: unclipped)", p.value_clip)
        _check(p.advantage_std_floor >= 0, "ppo.advantage_std_floor", ">= 0", p.advantage_std_floor)
        if self.model.fsdp:
            raise ValueError(
                "PPO does not run sharded yet (its value head sits outside FSDP): "
                "set model.fsdp: false, or algorithm: grpo (scripts/train_grpo.py)"
            )


@dataclass
class GRPOConfig(TrainConfig):
    """GRPO: the shared sections + ``grpo``. (With the deprecated ``algorithm: ppo``,
    PPO: :meth:`as_ppo`.)"""

    algorithm: Literal["grpo", "ppo"] = param(
        "grpo",
        help="grpo: group-relative advantages of episode returns. ppo (deprecated: run "
        "scripts/train_ppo.py, whose ppo section holds all of PPO's settings): PPO with "
        "the grpo section's surrogate settings and the ppo section's others.",
    )
    grpo: GRPOSection = param(factory=GRPOSection, help="GRPO.")
    ppo: PPOSection = param(
        factory=PPOSection,
        help="PPO's settings: scripts/train_ppo.py's (here read only with the deprecated "
        "algorithm: ppo).",
    )
    ignored_sections: typing.ClassVar[tuple[str, ...]] = ("rs",)

    @property
    def trains_value_head(self) -> bool:
        return self.algorithm == "ppo"

    def __post_init__(self) -> None:
        super().__post_init__()
        g = self.grpo
        _check_surrogate(g, "grpo", self)
        _check(
            g.replay_per_instance >= 1, "grpo.replay_per_instance", ">= 1", g.replay_per_instance
        )
        _check(
            g.replay_max_instances >= 1, "grpo.replay_max_instances", ">= 1", g.replay_max_instances
        )
        if self.algorithm == "ppo":
            warnings.warn(PPO_SPELLING, DeprecationWarning, stacklevel=3)
            self.as_ppo()  # PPO's checks, as a PPOConfig makes them
        elif self.rollout.group_size < 2:
            raise ValueError(
                f"rollout.group_size: GRPO needs >= 2 episodes per task instance (the "
                f"advantages of a group of 1 are all 0), got {self.rollout.group_size}: set "
                "rollout.group_size >= 2"
            )

    def as_ppo(self) -> PPOConfig:
        """The :class:`PPOConfig` the deprecated ``algorithm: ppo`` asks for: PPO's loss
        reads this config's grpo surrogate fields (:data:`SURROGATE_FIELDS`), as it did.

        Raises:
            ValueError: ``grpo.replay`` (PPO forms no groups), a ppo surrogate field set to
                another value than grpo's, or a failed PPO check.
        """
        if self.grpo.replay:
            raise ValueError(
                "grpo.replay swaps episodes within GRPO groups, which PPO does not form: "
                "set grpo.replay: false with algorithm: ppo"
            )
        ppo = copy.deepcopy(self.ppo)
        default = SurrogateSection()
        for name in SURROGATE_FIELDS:
            given, read = getattr(ppo, name), getattr(self.grpo, name)
            if given not in (getattr(default, name), read):
                raise ValueError(
                    f"ppo.{name} = {given!r} but grpo.{name} = {read!r}: with algorithm: ppo "
                    f"in a GRPO config PPO reads grpo.{name}; run scripts/train_ppo.py, "
                    f"which reads ppo.{name}"
                )
            setattr(ppo, name, read)
        shared = {f.name: copy.deepcopy(getattr(self, f.name)) for f in fields(TrainConfig)}
        return PPOConfig(**shared, ppo=ppo)


def check_quantization(m: ModelConfig) -> None:
    """Quantized weights go with LoRA on one process's whole model (called again when an
    FSDP launch sets ``model.fsdp``).

    Raises:
        ValueError: both 8 and 4 bits, quantized full fine-tuning, or FSDP + quantized.
    """
    mode = quantization_mode(
        load_in_8bit=m.load_in_8bit, load_in_4bit=m.load_in_4bit, prefix="model."
    )
    if mode is None:
        return
    flag = f"model.load_in_{mode}"
    if m.lora_rank == 0:
        raise ValueError(
            f"{flag} with model.lora_rank 0 (full fine-tuning): quantized weights cannot be "
            f"trained; set model.lora_rank > 0 (QLoRA: LoRA on the quantized base) or unset {flag}"
        )
    if m.fsdp:
        raise ValueError(
            f"{flag} with model.fsdp (or the FSDP accelerate config): FSDP shards float "
            f"weights, not bitsandbytes ones; launch without FSDP (LoRA on a quantized "
            f"base fits one GPU per process) or unset {flag}"
        )


def _check(ok: bool, name: str, expected: str, got: Any) -> None:
    if not ok:
        raise ValueError(f"{name}: expected {expected}, got {got!r}")


def _check_model(m: ModelConfig) -> None:
    if (m.lora_preset == "custom") != (m.lora_target_modules is not None):
        raise ValueError(
            "model.lora_target_modules goes with model.lora_preset: custom (and custom "
            f"needs it); got lora_preset {m.lora_preset!r}, lora_target_modules "
            f"{m.lora_target_modules!r}"
        )
    _check(m.lora_rank >= 0, "model.lora_rank", ">= 0 (0: full fine-tuning)", m.lora_rank)
    _check(0 <= m.lora_dropout < 1, "model.lora_dropout", "in [0, 1)", m.lora_dropout)
    check_quantization(m)
    if m.adapter_path is not None and m.lora_rank == 0:
        raise ValueError(
            "model.adapter_path is set but model.lora_rank is 0 (full fine-tuning): "
            "set model.lora_rank > 0 to train the adapter, or unset model.adapter_path"
        )


def _check_env(env: EnvConfig) -> None:
    _check(env.num_envs >= 1, "env.num_envs", ">= 1", env.num_envs)
    _check(env.max_steps >= 1, "env.max_steps", ">= 1", env.max_steps)
    if env.reward_mode == "dense" and not env.has_oracle:
        raise ValueError(DENSE_ON_OPENENV)
    if env.screen_size is not None:
        try:
            check_screen(env.screen_size)
        except ValueError as exc:
            raise ValueError(f"env.screen_size: {exc}") from None
        if env.runtime == "openenv":
            raise ValueError(
                "env.screen_size: an OpenEnv server serves its own screen; "
                "leave it unset with env.runtime openenv"
            )
    _check_tasks(env)
    if env.task_seed is not None:
        _check(
            0 <= env.task_seed < 2**31,
            "env.task_seed",
            "in [0, 2**31) (seeds from 2**31 up are evaluation's)",
            env.task_seed,
        )


def _check_rollout(r: RolloutConfig, m: ModelConfig) -> None:
    _check(r.group_size >= 1, "rollout.group_size", ">= 1", r.group_size)
    if r.episodes_per_iteration < 1 or r.episodes_per_iteration % r.group_size:
        raise ValueError(
            f"rollout.episodes_per_iteration: expected a positive multiple of "
            f"rollout.group_size = {r.group_size}, got {r.episodes_per_iteration}"
        )
    _check(r.temperature > 0, "rollout.temperature", "> 0", r.temperature)
    _check(0 < r.top_p <= 1, "rollout.top_p", "in (0, 1]", r.top_p)
    _check(r.max_new_tokens >= 1, "rollout.max_new_tokens", ">= 1", r.max_new_tokens)
    _check(r.max_images >= 1, "rollout.max_images", ">= 1", r.max_images)
    _check(r.max_staleness >= 1, "rollout.max_staleness", ">= 1", r.max_staleness)
    if r.mode == "async" and m.fsdp:
        raise ValueError(
            "rollout.mode async samples with a copy of the weights in a thread of its own, "
            "and FSDP holds them in shards gathered by collectives: set rollout.mode: sync "
            "with model.fsdp (or model.fsdp: false)"
        )
    if r.backend == "vllm" and m.lora_rank == 0:
        raise ValueError(
            "rollout.backend is vllm, which loads LoRA adapters at run time, but "
            "model.lora_rank is 0: set model.lora_rank > 0 or rollout.backend: hf"
        )
    if r.backend == "vllm" and m.lora_modules_to_save:
        raise ValueError(
            "rollout.backend is vllm, which refuses LoRA adapters with modules_to_save, "
            f"but model.lora_modules_to_save is {list(m.lora_modules_to_save)}: the run "
            "would stop at its first weight publish; set model.lora_modules_to_save: [] "
            "or rollout.backend: hf"
        )


def _check_optim(o: OptimConfig) -> None:
    if o.learning_rate is None:
        raise ValueError("optim.learning_rate: unresolved (TrainConfig.__post_init__ sets it)")
    _check(o.learning_rate > 0, "optim.learning_rate", "> 0", o.learning_rate)
    _check(o.epochs >= 1, "optim.epochs", ">= 1", o.epochs)
    _check(o.micro_batch_tokens >= 1, "optim.micro_batch_tokens", ">= 1", o.micro_batch_tokens)
    _check(
        o.grad_accumulation_steps >= 1,
        "optim.grad_accumulation_steps",
        ">= 1",
        o.grad_accumulation_steps,
    )
    _check(o.max_grad_norm >= 0, "optim.max_grad_norm", ">= 0", o.max_grad_norm)
    _check(o.warmup_iterations >= 0, "optim.warmup_iterations", ">= 0", o.warmup_iterations)
    if o.warmup_iterations and o.lr_scheduler == "constant":
        raise ValueError(
            f"optim.warmup_iterations = {o.warmup_iterations} does nothing with "
            "optim.lr_scheduler: constant: set optim.lr_scheduler: constant_with_warmup "
            "(or linear, cosine), or optim.warmup_iterations: 0"
        )


def _check_surrogate(s: SurrogateSection, section: str, config: TrainConfig) -> None:
    """The clipped surrogate's settings in ``section`` (``grpo`` or ``ppo``); an unset
    ``tis_cap`` is derived here, once, for rollouts from other weights or kernels."""
    _check(s.clip_epsilon > 0, f"{section}.clip_epsilon", "> 0", s.clip_epsilon)
    _check(s.kl_beta >= 0, f"{section}.kl_beta", ">= 0", s.kl_beta)
    _check(
        s.negative_advantage_scale >= 0,
        f"{section}.negative_advantage_scale",
        ">= 0",
        s.negative_advantage_scale,
    )
    if config.rollout.mode == "async" and s.tis_cap is None:
        # An actor's tokens come from older weights than the learner's, and the weight
        # corrects for it (docs/training.md).
        s.tis_cap = ASYNC_TIS_CAP
    if config.rollout.backend == "vllm" and s.tis_cap is None:
        # vLLM's kernels sample from another distribution than the trainer's: the
        # trainer's old logprobs centre the ratio, the weight corrects the sampling
        # (TRL's vllm_importance_sampling_correction is on by default too).
        s.tis_cap = VLLM_TIS_CAP
    if s.tis_cap is not None:
        _check(s.tis_cap >= 1, f"{section}.tis_cap", ">= 1 (or null: off)", s.tis_cap)
    if s.kl_beta > 0 and config.model.lora_rank == 0:
        raise ValueError(
            f"{section}.kl_beta > 0 needs a reference model; the trainer uses the same model "
            f"with its LoRA adapter disabled, so set model.lora_rank > 0 (or {section}.kl_beta: 0)"
        )


def _check_tasks(env: EnvConfig) -> None:
    """``env.tasks`` and ``env.task_options`` name known tasks, with weights > 0 and
    options each task accepts (``ValueError`` before any session starts)."""
    from uirl_gym.tasks import task_spec

    for name, weight in (env.tasks or {}).items():
        try:
            task_spec(name)
        except ValueError as exc:
            raise ValueError(f"env.tasks: {exc}") from None
        number = isinstance(weight, int | float) and not isinstance(weight, bool)
        _check(number and 0 < weight < float("inf"), f"env.tasks.{name}", "a number > 0", weight)
    for name, options in (env.task_options or {}).items():
        try:
            spec = task_spec(name)
            if not isinstance(options, dict):
                raise ValueError(f"must be a mapping of reset options, got {options!r}")
            spec.check_options({k: v for k, v in options.items() if k != "split"})
        except ValueError as exc:
            raise ValueError(f"env.task_options.{name}: {exc}") from None


def _check_demonstrations(sources: list[str]) -> None:
    """Each of ``rs.demonstrations`` is a run directory, an exported dataset or a Hub
    dataset (checked without downloading anything)."""
    from uirl_agents.dataset.folder import check_episode_source

    for source in sources:
        if not isinstance(source, str) or not source:
            raise ValueError(
                "rs.demonstrations: expected a list of run directories or datasets, got "
                f"{source!r} in it"
            )
        try:
            check_episode_source(source)
        except ValueError as exc:
            raise ValueError(
                f"rs.demonstrations: {exc}: fix the path, or record or export there first"
            ) from None
