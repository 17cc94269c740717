"""Episodes: collecting them (:mod:`~uirl_agents.episodes.rollout`, the one episode loop),
storing them (:mod:`~uirl_agents.episodes.trajectories`, the on-disk format) and showing
them (:mod:`~uirl_agents.episodes.viewer`, an HTML replay)."""
