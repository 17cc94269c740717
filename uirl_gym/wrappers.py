"""Gymnasium wrappers for uirl envs.

:class:`TopLeftCrop`: the screen's top-left ``width`` x ``height`` as the observation and
the action space, for tasks drawn there (MiniWoB++'s task area: 160x210 at ``zoom`` 1,
320x420 at 2, 480x630 at 3): a small input for fast training, the same pixels.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from gymnasium import Env, Wrapper, spaces

from uirl_gym.actions import SCREEN_HEIGHT, SCREEN_WIDTH


class TopLeftCrop(Wrapper[dict[str, Any], Any, dict[str, Any], Any]):
    """The top-left ``width`` x ``height`` of the screen, observed and acted on.

    The crop starts at the screen's origin, so a pixel of the crop is the same pixel of
    the screen: actions pass through unchanged; the action space's ``x``/``end_x`` and
    ``y``/``end_y`` only range over the crop (a sampled click lands inside it).

    Raises:
        ValueError: a size that is not within the 1280x800 screen.
    """

    def __init__(self, env: Env, width: int, height: int) -> None:
        super().__init__(env)
        if not (0 < width <= SCREEN_WIDTH and 0 < height <= SCREEN_HEIGHT):
            raise ValueError(
                f"crop: expected 1..{SCREEN_WIDTH} x 1..{SCREEN_HEIGHT}, got {width}x{height}"
            )
        self.width, self.height = width, height
        obs_space = env.observation_space
        assert isinstance(obs_space, spaces.Dict)
        self.observation_space = spaces.Dict(
            {
                **obs_space.spaces,
                "screenshot": spaces.Box(0, 255, (height, width, 3), dtype=np.uint8),
            }
        )
        act_space = env.action_space
        assert isinstance(act_space, spaces.Dict)
        self.action_space = spaces.Dict(
            {
                **act_space.spaces,
                "x": spaces.Discrete(width),
                "end_x": spaces.Discrete(width),
                "y": spaces.Discrete(height),
                "end_y": spaces.Discrete(height),
            }
        )

    def _crop(self, obs: dict[str, Any]) -> dict[str, Any]:
        return {**obs, "screenshot": obs["screenshot"][: self.height, : self.width]}

    def reset(self, **kwargs: Any) -> tuple[dict[str, Any], dict[str, Any]]:
        obs, info = self.env.reset(**kwargs)
        return self._crop(obs), info

    def step(self, action: Any) -> tuple[dict[str, Any], Any, bool, bool, dict[str, Any]]:
        obs, reward, terminated, truncated, info = self.env.step(action)
        return self._crop(obs), reward, terminated, truncated, info
