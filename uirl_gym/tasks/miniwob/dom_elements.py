"""MiniWoB++'s own DOM observation: the ``miniwob`` package's ``dom_elements``.

For users who come from the ``miniwob`` package (issue 41): the same elements, fields and
space as its ``observation["dom_elements"]``, made by the same code (its ``DOMElement``
and ``serialize_dom_element``) from the same call, the page's own ``core.getDOMInfo()``
(``GET /page?include=dom_elements``). Each element: ``ref`` (stable within an episode;
text pseudo-elements count down from -1), ``parent`` (0: the root), ``left``, ``top``,
``width``, ``height`` (float32, page pixels: screen pixels at zoom 1, the 160x210 screen;
times the zoom on a larger one), ``tag`` (``DIV``, ``INPUT_text``, ``t`` for text),
``text``, ``value``, ``id``, ``classes``, ``bg_color`` and ``fg_color`` (RGBA, 0..1) and
``flags`` (focused, tampered, targeted, is_leaf).

The ``miniwob`` package is imported here only (it is installed wherever a MiniWoB++ id
is registered).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from gymnasium import spaces

__all__ = ["dom_elements", "dom_elements_space"]


def dom_elements_space(screen: tuple[int, int]) -> spaces.Space[Any]:
    """The ``miniwob`` package's own space of ``dom_elements`` (a ``Sequence`` of its
    element ``Dict``)."""
    from miniwob.observation import get_observation_space

    space: spaces.Space[Any] = get_observation_space(*screen)["dom_elements"]
    return space


def dom_elements(dom_info: Mapping[str, Any]) -> tuple[dict[str, Any], ...]:
    """``core.getDOMInfo()``'s tree as the ``miniwob`` package's ``dom_elements``: its
    elements in document order, the root first."""
    from miniwob.dom import DOMElement
    from miniwob.observation import serialize_dom_element

    root = DOMElement(dict(dom_info))
    return tuple(serialize_dom_element(element) for element in root.subtree_elements)
