"""Policies: every agent behind the one batched interface of :mod:`.base`."""

from uirl_agents.policies.base import Policy, PolicyStep

__all__ = ["Policy", "PolicyStep"]
