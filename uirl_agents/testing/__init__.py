"""Models for tests and demos, apart from the library: tiny random checkpoints of each
supported family, built offline (:mod:`uirl_agents.testing.tiny_model`)."""
