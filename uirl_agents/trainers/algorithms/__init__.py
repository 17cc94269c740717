"""The algorithms: each supplies the loop's hooks (:class:`~uirl_agents.trainers.loop.Algorithm`)
and nothing else; what they share is the rest of :mod:`uirl_agents.trainers`.

- :mod:`~uirl_agents.trainers.algorithms.expert_iteration` (``ExpertIteration``: rejection
  sampling + SFT) with :mod:`~uirl_agents.trainers.algorithms.sft` (its samples and loss)
  and :mod:`~uirl_agents.trainers.algorithms.demonstrations` (its cold start);
- :mod:`~uirl_agents.trainers.algorithms.grpo` (``GRPO``) with
  :mod:`~uirl_agents.trainers.algorithms.replay` (its replay of successes);
- :mod:`~uirl_agents.trainers.algorithms.ppo` (``PPO``: a value head and GAE).
"""
