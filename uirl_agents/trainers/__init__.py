"""RL trainers for the uirl env: expert iteration, GRPO and PPO (see docs/training.md).

- :func:`uirl_agents.trainers.loop.train` runs the one loop with an algorithm's hooks:
  :class:`~uirl_agents.trainers.rs.ExpertIteration` (with
  :class:`~uirl_agents.trainers.config.RSConfig`), :class:`~uirl_agents.trainers.grpo.GRPO`
  and :class:`~uirl_agents.trainers.ppo.PPO` (with
  :class:`~uirl_agents.trainers.config.GRPOConfig`, ``algorithm: grpo | ppo``)
- configs from YAML + command line: :mod:`uirl_agents.trainers.cli`
"""
