"""One rank of test_trl's 2-process run: scripts/train_trl.py's trainer, then what the
test compares (this rank's weights, sessions and logs) written to the output dir.

    accelerate launch --multi_gpu --num_processes 2 tests/trl_ranks.py CONFIG OUT
"""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import torch
import yaml

ROOT = Path(__file__).resolve().parents[1]


def main() -> None:
    config_path, out = Path(sys.argv[1]), Path(sys.argv[2])
    spec = importlib.util.spec_from_file_location("train_trl", ROOT / "scripts/train_trl.py")
    train_trl = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(train_trl)
    from uirl_agents.integrations.trl import close_environments

    trainer = train_trl.build_trainer(yaml.safe_load(config_path.read_text()), out)
    model = trainer.accelerator.unwrap_model(trainer.model)
    before = {n: p.detach().clone() for n, p in model.named_parameters()}
    trainer.train()
    sessions = sorted(
        env._holder["backend"].env.session.base_url
        for pool in trainer._environment_pool.values()
        for env in pool
        if env._holder["backend"] is not None and env._holder["backend"].env.session
    )
    after = {n: p.detach().clone() for n, p in model.named_parameters()}
    rank = trainer.accelerator.process_index
    torch.save(after, out / f"rank{rank}.pt")
    record = {
        "world_size": trainer.accelerator.num_processes,
        "sessions": sessions,
        "changed": sum(not torch.equal(after[n], before[n]) for n in after),
        "log_history": trainer.state.log_history,
    }
    (out / f"rank{rank}.json").write_text(json.dumps(record))
    close_environments()


if __name__ == "__main__":
    main()
