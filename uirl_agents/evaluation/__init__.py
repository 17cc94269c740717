"""Benchmarking agents on the env: the agent registry (:mod:`~uirl_agents.evaluation.agents`),
runs, statistics and reports (:mod:`~uirl_agents.evaluation.benchmark`), prices
(:mod:`~uirl_agents.evaluation.cost`) and the leaderboard over result folders
(:mod:`~uirl_agents.evaluation.leaderboard`). ``scripts/evaluate.py`` is the command line."""
