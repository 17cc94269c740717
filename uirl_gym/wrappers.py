"""Gymnasium wrappers for uirl envs.

:class:`TopLeftCrop`: the screen's top-left ``width`` x ``height`` as the observation and
the action space, for tasks drawn there (MiniWoB++'s task area: 160x210 at ``zoom`` 1,
320x420 at 2, 480x630 at 3): a small input for fast training, the same pixels.

:class:`DiscreteClicks`: flat spaces for the libraries Gymnasium users reach for first
(Stable-Baselines3, CleanRL): the screenshot as an image ``Box`` and one ``Discrete``
action per cell of a grid of clicks (plus optional key presses).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
from gymnasium import Env, Wrapper, spaces
from PIL import Image

from uirl_gym.actions import SCREEN_HEIGHT, SCREEN_WIDTH, Action, ActionType


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


class DiscreteClicks(Wrapper[np.ndarray, np.int64, dict[str, Any], Any]):
    """The screenshot as an image ``Box``; the actions as ``Discrete(columns * rows +
    len(keys))``: a left click at the centre of each cell of a grid over ``region``
    (row by row from the top left), then one key press per entry of ``keys``.

    What Stable-Baselines3's ``CnnPolicy`` and a CleanRL script take as they are
    (``stable_baselines3.common.env_checker.check_env`` passes). The instruction is
    not observed: MiniWoB++ pages (and uirl's tasks) draw it on the screen, so a pixel
    policy reads it there. Rewards, termination and ``info`` are the wrapped env's.

    >>> from uirl_gym.wrappers import DiscreteClicks
    >>> import gymnasium as gym
    >>> env = DiscreteClicks(  # doctest: +SKIP
    ...     gym.make("uirl/miniwob.click-test-2-v0", screen_size=(160, 210)),
    ...     grid=(8, 8), region=(0, 50, 160, 160))

    Args:
        env: a uirl env (or a wrapper of one, e.g. :class:`TopLeftCrop`) whose
            observations hold ``screenshot``.
        grid: ``(columns, rows)`` of the click grid.
        region: ``(x, y, width, height)`` the grid covers, in the screenshot's pixels
            (= screen pixels); default: the whole screenshot. MiniWoB++ at 160x210:
            ``(0, 50, 160, 160)`` leaves out the instruction bar.
        keys: key presses appended to the actions (``Action`` ``keys`` syntax, e.g.
            ``("enter", "tab", "ctrl+a")``).
        observation_size: ``(width, height)`` to resize screenshots to (bilinear), e.g.
            a smaller input for a CNN on 1280x800 screens; default: as they are.

    Attributes:
        clicks: the screen point of each click action, by action index.

    Raises:
        ValueError: an empty grid or one with more cells than the region has pixels,
            a region outside the screenshot, an invalid key, a bad observation size.
    """

    # Gymnasium annotates Wrapper.env with the wrapper's own types (Env[WrapperObsType,
    # WrapperActType]); the env this one wraps observes dicts and takes uirl Actions.
    env: Env[dict[str, Any], Any]  # type: ignore[assignment]

    def __init__(
        self,
        env: Env,
        grid: tuple[int, int] = (8, 8),
        *,
        region: tuple[int, int, int, int] | None = None,
        keys: Sequence[str] = (),
        observation_size: tuple[int, int] | None = None,
    ) -> None:
        super().__init__(env)
        obs_space = env.observation_space
        screenshot_space = (
            obs_space.spaces.get("screenshot") if isinstance(obs_space, spaces.Dict) else None
        )
        if not isinstance(screenshot_space, spaces.Box):
            raise ValueError(f"expected an env observing a screenshot, got {obs_space}")
        height, width = screenshot_space.shape[:2]
        x0, y0, region_w, region_h = region if region is not None else (0, 0, width, height)
        if not (0 <= x0 and 0 <= y0 and 0 < region_w and 0 < region_h):
            raise ValueError(
                f"region: expected (x >= 0, y >= 0, width > 0, height > 0), got {region}"
            )
        if x0 + region_w > width or y0 + region_h > height:
            raise ValueError(f"region {region} reaches outside the {width}x{height} screenshot")
        columns, rows = grid
        if not (0 < columns <= region_w and 0 < rows <= region_h):
            raise ValueError(
                f"grid: expected 1..{region_w} columns and 1..{region_h} rows, got {grid}"
            )
        screen = (width, height)
        self.clicks: list[tuple[int, int]] = [
            (x0 + int((c + 0.5) * region_w / columns), y0 + int((r + 0.5) * region_h / rows))
            for r in range(rows)
            for c in range(columns)
        ]
        self._actions = [Action(ActionType.LEFT_CLICK, x=x, y=y) for x, y in self.clicks]
        self._actions += [Action(ActionType.KEYS, keys=k).validate(screen=screen) for k in keys]
        self.grid, self.region, self.keys = grid, (x0, y0, region_w, region_h), tuple(keys)
        if observation_size is not None:
            out_w, out_h = observation_size
            if out_w < 1 or out_h < 1:
                raise ValueError(
                    f"observation_size: expected positive (width, height), got {observation_size}"
                )
            height, width = out_h, out_w
        self.observation_size = observation_size
        self.observation_space = spaces.Box(0, 255, (height, width, 3), dtype=np.uint8)
        self.action_space = spaces.Discrete(len(self._actions))

    def action(self, index: int) -> Action:
        """The uirl action that action ``index`` performs."""
        if not 0 <= index < len(self._actions):
            raise ValueError(f"action: expected 0..{len(self._actions) - 1}, got {index}")
        return self._actions[index]

    def _observe(self, obs: dict[str, Any]) -> np.ndarray:
        # A writable array of its own: the client's screenshots are read-only views of
        # the decoded buffer, which torch.as_tensor (SB3) warns about.
        screenshot = obs["screenshot"]
        if self.observation_size is None:
            return np.array(screenshot, dtype=np.uint8)
        image = Image.fromarray(screenshot).resize(self.observation_size, Image.Resampling.BILINEAR)
        return np.array(image, dtype=np.uint8)

    def reset(self, **kwargs: Any) -> tuple[np.ndarray, dict[str, Any]]:
        obs, info = self.env.reset(**kwargs)
        return self._observe(obs), info

    def step(self, action: Any) -> tuple[np.ndarray, float, bool, bool, dict[str, Any]]:
        obs, reward, terminated, truncated, info = self.env.step(self.action(int(action)))
        return self._observe(obs), float(reward), bool(terminated), bool(truncated), info
