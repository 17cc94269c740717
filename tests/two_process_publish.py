"""Two processes shard the tiny Qwen2.5-VL with FSDP and save the LoRA adapter as a
checkpoint or a vLLM weight publish writes it (a test helper; scripts/bench_update.py
runs it too).

    torchrun --standalone --nproc_per_node 2 tests/two_process_publish.py MODEL_DIR OUT_DIR [--head]

A rank-8 adapter (with ``--head`` also ``lm_head`` as a ``modules_to_save``), trained
one step so that no weight is at its initial value, saved from
``sharding.saved_weights_state`` (``OUT_DIR/adapter``) and from the whole model gathered
as before (``OUT_DIR/adapter_whole``). ``OUT_DIR/report.json``: the bytes gathered onto
the main process each way, and each process's sum of the trainable weights gathered
whole (they must agree). Gloo on CPU.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import torch
import torch.distributed as dist

from uirl_agents.trainers import sharding
from uirl_agents.trainers.cli import load_config
from uirl_agents.trainers.config import GRPOConfig
from uirl_agents.trainers.policy_model import build_model, trainable_parameters


def state_bytes(state: dict[str, torch.Tensor] | None) -> int:
    return sum(t.numel() * t.element_size() for t in (state or {}).values())


def main(model_dir: str, out_dir: str, head: bool) -> None:
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    out = Path(out_dir)
    overrides = {"model.name": model_dir, "model.lora_rank": "8"}
    if head:
        overrides["model.lora_modules_to_save"] = "[lm_head]"
    config = load_config(GRPOConfig, None, overrides)
    torch.manual_seed(0)
    model = build_model(config.model, model_dir, torch.device("cpu"))
    sharding.shard_model(model, torch.float32)
    params = trainable_parameters(model)
    # One step, so that LoRA's B (zeros at the start) is not all zeros.
    optimizer = torch.optim.SGD(params, lr=0.1)
    ids = torch.tensor([[5, 6, 7, 8, 9]])
    model(input_ids=ids, attention_mask=torch.ones_like(ids)).logits.float().pow(
        2
    ).mean().backward()
    optimizer.step()
    saved = sharding.saved_weights_state(model)
    whole = sharding.full_model_state(model)
    weights = [sharding.whole(p.detach()).flatten() for p in params]  # collective
    every = [None] * dist.get_world_size()
    dist.all_gather_object(every, [float(torch.cat(weights).double().sum())])
    if rank == 0:
        for name, state in (("adapter", saved), ("adapter_whole", whole)):
            model.save_pretrained(str(out / name), selected_adapters=["default"], state_dict=state)
        report = {
            "gathered_bytes": state_bytes(saved),
            "whole_model_bytes": state_bytes(whole),
            "ranks_weight_sums": every,
        }
        (out / "report.json").write_text(json.dumps(report))
    # Both ranks past their last collective, then out without tearing gloo down (see
    # two_process_update.py: its teardown now and then aborts a rank).
    dist.barrier()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], head="--head" in sys.argv[3:])
