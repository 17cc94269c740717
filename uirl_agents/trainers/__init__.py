"""RL trainers for the uirl env: expert iteration and GRPO (see docs/training.md).

- :func:`uirl_agents.trainers.rs.train_rs` with :class:`~uirl_agents.trainers.config.RSConfig`
- :func:`uirl_agents.trainers.grpo.train_grpo` with
  :class:`~uirl_agents.trainers.config.GRPOConfig`
- configs from YAML + command line: :mod:`uirl_agents.trainers.cli`
"""
