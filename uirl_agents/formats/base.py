"""What every model format shares: image sizing, coordinate mapping, the message layout.

A *format* is everything about a model family's conversation with the env that is
not weights: the prompt, how screenshots are sized, how the output reads, and how its
coordinates map to screen pixels. Policies (HF, OpenAI-compatible) build prompts and
parse completions only through a :class:`ModelFormat`, so the coordinate convention of
each family is converted here, once.

Image sizing: the model sees each screenshot resized with :func:`smart_resize` (the
Qwen2-VL rule: both sides multiples of ``factor``, pixel count within
``[min_pixels, max_pixels]``). Policies resize the screenshot themselves
(:meth:`ModelFormat.prepare_image`) and hand that exact image to the processor or
server, whose own ``smart_resize`` then leaves it as is (a size that already obeys the
rule is a fixed point). So the model's coordinates are pixels of the image the policy
recorded, and :class:`ScreenGeometry` maps them to the screen.

This module must not import torch: the OpenAI-compatible policy uses it without the
ML stack.
"""

from __future__ import annotations

import abc
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, NamedTuple

import numpy as np
from PIL import Image

from uirl_gym.actions import SCREEN_HEIGHT, SCREEN_WIDTH, Action

# Qwen2.5-VL's vision tower: 14 px patches merged 2x2, so sizes are multiples of 28.
IMAGE_FACTOR = 28
DEFAULT_MIN_PIXELS = 4 * IMAGE_FACTOR * IMAGE_FACTOR
# The limit UI-TARS ships with; a 1280x800 screen stays at its native scale under it.
DEFAULT_MAX_PIXELS = 16384 * IMAGE_FACTOR * IMAGE_FACTOR
MAX_ASPECT_RATIO = 200

Message = dict[str, Any]


class FormatParseError(ValueError):
    """A completion that does not follow the format; the message says what was wrong."""


class ParsedOutput(NamedTuple):
    """A parsed completion; exactly one of ``action`` / ``error`` is None.

    Attributes:
        action: the env action in screen pixels, validated.
        error: ``"ParseError: <what was wrong>"`` when there is no action.
        thought: the model's reasoning text.
        notes: what the parse decided that the text alone does not show, one line
            each, e.g. that actions after the first were dropped, that the model
            called the user, or where a click without coordinates landed.
    """

    action: Action | None
    error: str | None
    thought: str
    notes: tuple[str, ...] = ()


def smart_resize(
    height: int,
    width: int,
    factor: int = IMAGE_FACTOR,
    min_pixels: int = DEFAULT_MIN_PIXELS,
    max_pixels: int = DEFAULT_MAX_PIXELS,
) -> tuple[int, int]:
    """The size Qwen2-VL / Qwen2.5-VL / UI-TARS processors resize an image to.

    Same rule as ``qwen_vl_utils.smart_resize`` and transformers' Qwen2-VL image
    processor: round each side to a multiple of ``factor``; if the pixel count leaves
    ``[min_pixels, max_pixels]``, scale both sides by one factor, keeping the aspect ratio.

    Args:
        height: image height in pixels.
        width: image width in pixels.
        factor: both output sides are multiples of this.
        min_pixels: lower bound on ``height * width`` of the output.
        max_pixels: upper bound on ``height * width`` of the output.

    Returns:
        ``(resized_height, resized_width)``.

    Raises:
        ValueError: a side is not positive or the aspect ratio exceeds 200.

    Examples:
        >>> smart_resize(800, 1280)
        (812, 1288)
        >>> smart_resize(800, 1280, max_pixels=28 * 28 * 16)
        (84, 140)
    """
    if height <= 0 or width <= 0:
        raise ValueError(f"image size must be positive, got {height}x{width} (height x width)")
    if max(height, width) / min(height, width) > MAX_ASPECT_RATIO:
        raise ValueError(
            f"aspect ratio must be at most {MAX_ASPECT_RATIO}, got {height}x{width} (height x width)"
        )
    h_bar = max(factor, round(height / factor) * factor)
    w_bar = max(factor, round(width / factor) * factor)
    if h_bar * w_bar > max_pixels:
        beta = math.sqrt((height * width) / max_pixels)
        h_bar = max(factor, math.floor(height / beta / factor) * factor)
        w_bar = max(factor, math.floor(width / beta / factor) * factor)
    elif h_bar * w_bar < min_pixels:
        beta = math.sqrt(min_pixels / (height * width))
        h_bar = math.ceil(height * beta / factor) * factor
        w_bar = math.ceil(width * beta / factor) * factor
    return h_bar, w_bar


@dataclass(frozen=True)
class FormatConfig:
    """How screenshots are sized for the model.

    Match these to the processor (HF) or the server (vLLM) so that their own resize is
    a no-op; ``uirl_agents.policies.hf.HFPolicy`` checks it.

    Attributes:
        min_pixels: lower bound on the resized image's pixel count.
        max_pixels: upper bound on the resized image's pixel count.
        factor: both sides of the resized image are multiples of this.
    """

    min_pixels: int = DEFAULT_MIN_PIXELS
    max_pixels: int = DEFAULT_MAX_PIXELS
    factor: int = IMAGE_FACTOR

    def __post_init__(self) -> None:
        if self.factor < 1:
            raise ValueError(f"factor: expected >= 1, got {self.factor}")
        if not 0 < self.min_pixels <= self.max_pixels:
            raise ValueError(
                f"min_pixels, max_pixels: expected 0 < min_pixels <= max_pixels, got "
                f"{self.min_pixels}, {self.max_pixels}; raise max_pixels or lower min_pixels"
            )
        if self.max_pixels < self.factor * self.factor:
            raise ValueError(
                f"max_pixels: expected >= factor**2 = {self.factor**2}, got {self.max_pixels}"
            )


def grid_pixel(value: float, size: int, target_size: int) -> int:
    """The pixel of a grid ``target_size`` pixels wide that holds the centre of pixel
    ``value`` of a grid ``size`` pixels wide over the same extent, clamped to the grid.

    The one coordinate mapping of uirl_agents: every model's points reach the screen
    through it (:class:`ScreenGeometry`; the vendor agents' display and TRL's downscaled
    screenshots use a :class:`ScreenGeometry` too). Pixel centres correspond, so a point
    mapped to a grid at least as fine and back is the point it was.

    >>> [grid_pixel(x, 1024, 1280) for x in (0, 1, 511, 1023)]
    [0, 1, 639, 1279]
    >>> [grid_pixel(grid_pixel(x, 1024, 1280), 1280, 1024) for x in (0, 1, 511, 1023)]
    [0, 1, 511, 1023]
    """
    return min(max(math.floor((value + 0.5) * target_size / size), 0), target_size - 1)


@dataclass(frozen=True)
class ScreenGeometry:
    """The screen and the model's image of it; maps points between the two.

    Attributes:
        screen_width, screen_height: the screenshot (= screen) size in pixels.
        image_width, image_height: the size of the image the model sees.
        pointer: where the mouse pointer is, in screen pixels, or None when unknown.
            Set per step by the policy's episode context (the last point a parsed
            action of this episode went to), so that a format whose syntax allows a
            click without coordinates ("click here") can resolve it to a point: the
            env only ever receives screen pixels.
    """

    screen_width: int
    screen_height: int
    image_width: int
    image_height: int
    pointer: tuple[int, int] | None = None

    def to_screen(self, x: float, y: float) -> tuple[int, int]:
        """A point in model-image pixels -> screen pixels (:func:`grid_pixel`: the pixel
        under its centre, clamped to the screen)."""
        return (
            grid_pixel(x, self.image_width, self.screen_width),
            grid_pixel(y, self.image_height, self.screen_height),
        )

    def to_image(self, x: float | None, y: float | None) -> tuple[int, int]:
        """A point in screen pixels -> model-image pixels (:func:`grid_pixel`, clamped to
        the image).

        Raises:
            ValueError: no point (``None``: an action that needs one and was not validated).
        """
        if x is None or y is None:
            raise ValueError(f"a point is needed, got ({x}, {y})")
        return (
            grid_pixel(x, self.screen_width, self.image_width),
            grid_pixel(y, self.screen_height, self.image_height),
        )


_ACTION_LINE = re.compile(r"^[ \t]*Action[ \t]*:[ \t]*", re.MULTILINE)
_THOUGHT_PREFIX = re.compile(r"^\s*Thought\s*:\s*")


def split_at_action_line(text: str) -> tuple[str, str | None]:
    """``(thought, action text)`` around the last ``Action:`` line of a
    ``Thought: ... / Action: ...`` reply, the ``Thought:`` prefix dropped; without such
    a line, ``(the whole text as thought, None)``."""
    matches = list(_ACTION_LINE.finditer(text))
    if not matches:
        return _THOUGHT_PREFIX.sub("", text).strip(), None
    last = matches[-1]
    return _THOUGHT_PREFIX.sub("", text[: last.start()]).strip(), text[last.end() :].strip()


@dataclass(frozen=True)
class StepView:
    """What a format shows the model of one step's observation.

    Attributes:
        image: the image the model sees, resized by the format (the screenshot, or the
            set-of-marks screenshot); None for a format that shows no image.
        text: the page as the format writes it (the accessibility tree, the element
            list); "" for a format that shows only the screenshot.
    """

    image: np.ndarray | None
    text: str = ""


def text_part(text: str) -> dict[str, str]:
    return {"type": "text", "text": text}


IMAGE_PLACEHOLDER: dict[str, str] = {"type": "image"}


class ModelFormat(abc.ABC):
    """Prompt building and output parsing for one model family.

    Attributes:
        name: the registry name (``get_format(name)``).
        observations: the env observations the format reads besides the screenshot and
            the instruction (``UIEnv(observations=...)``; none for the pixel formats).
        mode: what the model is shown: ``pixels`` (screenshots), ``axtree`` (the page
            as text), ``som`` (the set-of-marks screenshot and an element list).
        config: image sizing (:class:`FormatConfig`).

    Methods:
        geometry: the :class:`ScreenGeometry` for a screen size.
        prepare_image: resize a screenshot to what the model sees.
        view: what the model is shown of one observation (:class:`StepView`).
        build_messages: the chat messages for one step (image placeholders).
        parse: a completion -> ``(action | None, error | None, thought)``; never raises.
        render: an action (+ thought) -> the completion the model would write.
    """

    name: ClassVar[str]
    observations: ClassVar[tuple[str, ...]] = ()
    mode: ClassVar[str] = "pixels"

    def __init__(self, config: FormatConfig | None = None) -> None:
        self.config = config or FormatConfig()

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.config})"

    # ---- images and coordinates ------------------------------------------------------

    def geometry(
        self, screen_width: int = SCREEN_WIDTH, screen_height: int = SCREEN_HEIGHT
    ) -> ScreenGeometry:
        """The model's image size for a screen, as a point mapper."""
        height, width = smart_resize(
            screen_height,
            screen_width,
            factor=self.config.factor,
            min_pixels=self.config.min_pixels,
            max_pixels=self.config.max_pixels,
        )
        return ScreenGeometry(screen_width, screen_height, width, height)

    def geometry_for(self, screenshot: np.ndarray) -> ScreenGeometry:
        """The geometry of a ``(H, W, 3)`` screenshot."""
        height, width = screenshot.shape[:2]
        return self.geometry(width, height)

    def prepare_image(self, screenshot: np.ndarray) -> np.ndarray:
        """Resize a ``(H, W, 3)`` uint8 screenshot to the model's size (bicubic, as the processor).

        Returns the input unchanged when it already has that size.
        """
        geometry = self.geometry_for(screenshot)
        if (geometry.image_height, geometry.image_width) == screenshot.shape[:2]:
            return screenshot
        image = Image.fromarray(np.ascontiguousarray(screenshot, dtype=np.uint8))
        resized = image.resize(
            (geometry.image_width, geometry.image_height), Image.Resampling.BICUBIC
        )
        return np.asarray(resized)

    def view(self, observation: Mapping[str, Any]) -> StepView:
        """What the model is shown of ``observation`` (an env observation with the
        format's :attr:`observations`): here the resized screenshot."""
        return StepView(self.prepare_image(observation["screenshot"]))

    # ---- prompts -----------------------------------------------------------------------

    @abc.abstractmethod
    def system_prompt(self, geometry: ScreenGeometry) -> str:
        """The system message's text."""

    @abc.abstractmethod
    def task_prompt(self, instruction: str, geometry: ScreenGeometry) -> str:
        """The first user message's text (it carries the instruction)."""

    def step_parts(self, page: str) -> list[dict[str, str]]:
        """The user-message parts that show one step: its image placeholder (a format
        that shows the page as text writes ``page`` here)."""
        return [dict(IMAGE_PLACEHOLDER)]

    def build_messages(
        self,
        instruction: str,
        history: Sequence[str],
        num_images: int,
        geometry: ScreenGeometry,
        pages: Sequence[str] = (),
    ) -> list[Message]:
        """The chat messages for the next step of an episode.

        Layout (the UI-TARS convention, used for every format): system; user with the
        task; then per earlier step ``i`` a user message with its screenshot (only for the
        last ``num_images`` screenshots) and an assistant message with the model's output
        ``history[i]``; then a user message with the current screenshot. A screenshot
        right after the task text joins the task message.

        Args:
            instruction: the task instruction.
            history: the model's raw outputs of the earlier steps, oldest first.
            num_images: how many of the latest steps (current one included) are shown
                with their observation (:meth:`step_parts`: a screenshot, or the page as
                text); 1 <= num_images <= len(history) + 1.
            geometry: the screen/image sizes (the system prompt may state them).
            pages: the :attr:`StepView.text` of each shown step, oldest first (empty:
                the steps show no text).

        Returns:
            Messages with ``content`` a string (system, assistant) or a list of parts
            (user); images are ``{"type": "image"}`` placeholders, one per screenshot,
            oldest first: pass the last ``num_images`` screenshots in that order.

        Raises:
            ValueError: ``num_images`` outside ``1..len(history) + 1``, or ``pages`` not
                one text per shown step.
        """
        num_steps = len(history) + 1
        if not 1 <= num_images <= num_steps:
            raise ValueError(
                f"num_images: expected 1..{num_steps} (the screenshots this episode has), "
                f"got {num_images}"
            )
        if pages and len(pages) != num_images:
            raise ValueError(f"pages: expected one per shown step ({num_images}), got {len(pages)}")
        messages: list[Message] = [
            {"role": "system", "content": self.system_prompt(geometry)},
            {"role": "user", "content": [text_part(self.task_prompt(instruction, geometry))]},
        ]
        first_image_step = num_steps - num_images
        for step in range(num_steps):
            if step >= first_image_step:
                parts = self.step_parts(pages[step - first_image_step] if pages else "")
                if messages[-1]["role"] == "user":
                    messages[-1]["content"].extend(parts)
                else:
                    messages.append({"role": "user", "content": parts})
            if step < len(history):
                messages.append({"role": "assistant", "content": history[step]})
        return messages

    # ---- outputs -----------------------------------------------------------------------

    @abc.abstractmethod
    def split_thought(self, text: str) -> tuple[str, str]:
        """Split a completion into ``(thought, action_text)``; no validation."""

    @abc.abstractmethod
    def parse_action(
        self, action_text: str, geometry: ScreenGeometry
    ) -> tuple[Action, tuple[str, ...]]:
        """Parse the action part into an env action in screen pixels.

        Returns:
            ``(action, notes)``: the action (not yet validated) and the notes for
            :attr:`ParsedOutput.notes`.

        Raises:
            FormatParseError: the action text does not follow the format.
        """

    @abc.abstractmethod
    def render(self, action: Action, geometry: ScreenGeometry, thought: str = "") -> str:
        """The completion this model family would write for ``action`` (screen pixels).

        Raises:
            ValueError: the format cannot express the action.
        """

    def parse(self, text: str, geometry: ScreenGeometry | None = None) -> ParsedOutput:
        """Parse a completion into ``(action, error, thought)``; never raises.

        Args:
            text: the model's raw output.
            geometry: the screen the action is for (default: the 1280x800 env screen).

        Returns:
            ``ParsedOutput(action, None, thought, notes)`` with a validated action in
            screen pixels, or ``ParsedOutput(None, "ParseError: <what was wrong>",
            thought)``.
        """
        geometry = geometry or self.geometry()
        thought = ""
        try:
            thought, action_text = self.split_thought(text)
            action, notes = self.parse_action(action_text, geometry)
            action.validate()
        except ValueError as exc:  # FormatParseError, and Action.validate()'s errors
            return ParsedOutput(None, f"ParseError: {exc}", thought)
        return ParsedOutput(action, None, thought, notes)
