"""RL trainers for the uirl env: expert iteration, GRPO and PPO (see docs/training.md).

- :func:`uirl_agents.trainers.loop.train` runs the one loop with an algorithm's hooks
  (:mod:`uirl_agents.trainers.algorithms`):
  :class:`~uirl_agents.trainers.algorithms.expert_iteration.ExpertIteration` (with
  :class:`~uirl_agents.trainers.config.RSConfig`),
  :class:`~uirl_agents.trainers.algorithms.grpo.GRPO` (with
  :class:`~uirl_agents.trainers.config.GRPOConfig`) and
  :class:`~uirl_agents.trainers.algorithms.ppo.PPO` (with
  :class:`~uirl_agents.trainers.config.PPOConfig`); the rest of this package is what they
  share;
- configs from YAML + command line: :mod:`uirl_agents.trainers.cli`.
"""
