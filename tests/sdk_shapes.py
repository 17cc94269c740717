"""The vendors' own SDK types as the judge of our wire shapes.

Requests: :func:`check_body` walks a JSON body against an SDK request ``TypedDict``
(anthropic's and openai's ``*CreateParams``), strictly: a key the type does not
declare, a missing required key, a wrong literal or type fails, naming the path
(pydantic ignores unknown ``TypedDict`` keys and validates ``Iterable`` fields lazily,
so it would let both kinds of mistake through). Gemini's REST body is checked against
google-genai's pydantic models, which forbid unknown keys themselves.

Replies: :func:`anthropic_message`, :func:`openai_response` and :func:`gemini_response`
build the stand-ins' replies by validating them as the SDK's response models.
"""

from __future__ import annotations

import types
import typing
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import typing_extensions
from pydantic import TypeAdapter


class ShapeError(AssertionError):
    """A value that does not fit the SDK type."""


def check_body(value: Any, tp: Any, path: str = "body") -> None:
    """Raise :class:`ShapeError` unless ``value`` (JSON data) fits ``tp``."""
    errors = _errors(value, tp, path)
    if errors:
        raise ShapeError("; ".join(errors[:5]))


def _strip(tp: Any) -> Any:
    """``tp`` without ``Annotated``, ``Required``, ``NotRequired``, ``ReadOnly``."""
    while True:
        origin = typing_extensions.get_origin(tp)
        if origin is typing_extensions.Annotated:
            tp = typing_extensions.get_args(tp)[0]
        elif origin in (
            typing_extensions.Required,
            typing_extensions.NotRequired,
            getattr(typing_extensions, "ReadOnly", None),
        ):
            tp = typing_extensions.get_args(tp)[0]
        else:
            return tp


def _errors(value: Any, tp: Any, path: str) -> list[str]:
    tp = _strip(tp)
    if tp is Any or tp is object:
        return []
    if typing_extensions.is_typeddict(tp):
        return _typeddict_errors(value, tp, path)
    origin = typing_extensions.get_origin(tp)
    args = typing_extensions.get_args(tp)
    if origin in (typing.Union, types.UnionType):
        if value is None and type(None) in args:
            return []
        members = [arg for arg in args if arg is not type(None)]
        # The members the value says it is (its "type"), when it says.
        meant = [m for m in members if _discriminated(value, m)] or members
        tried = [_errors(value, member, path) for member in meant]
        if any(not errors for errors in tried):
            return []
        # The member that matched deepest is the one the value meant to be.
        return min(
            tried, key=lambda errors: (-max(len(e.split(":")[0]) for e in errors), len(errors))
        )
    if origin is typing.Literal or origin is typing_extensions.Literal:
        return [] if value in args else [f"{path}: {value!r} is not one of {args}"]
    if tp in _SCALARS:
        ok, what = _SCALARS[tp]
        return [] if ok(value) else [f"{path}: expected {what}, got {value!r}"]
    if origin in (dict, Mapping, typing.Dict) or tp is dict:  # noqa: UP006
        if not isinstance(value, dict):
            return [f"{path}: expected an object, got {value!r}"]
        if not args:
            return []
        return [e for k, v in value.items() for e in _errors(v, args[1], f"{path}.{k}")]
    if origin in (list, Iterable, Sequence, typing.List) or tp is list or _is_sequence(origin):  # noqa: UP006
        if not isinstance(value, list):
            return [f"{path}: expected an array, got {type(value).__name__}"]
        item = args[0] if args else Any
        return [e for k, v in enumerate(value) for e in _errors(v, item, f"{path}[{k}]")]
    # A type no JSON value is (bytes, a file, a path): a union's other members decide.
    return [f"{path}: expected {tp!r}, got {type(value).__name__}"]


_SCALARS = {
    type(None): (lambda v: v is None, "null"),
    str: (lambda v: isinstance(v, str), "a string"),
    bool: (lambda v: isinstance(v, bool), "a bool"),
    int: (lambda v: isinstance(v, int) and not isinstance(v, bool), "an integer"),
    float: (lambda v: isinstance(v, int | float) and not isinstance(v, bool), "a number"),
}


def _discriminated(value: Any, member: Any) -> bool:
    """Whether ``value``'s ``type`` is one the ``TypedDict`` ``member`` declares."""
    member = _strip(member)
    if not (isinstance(value, dict) and "type" in value and typing_extensions.is_typeddict(member)):
        return False
    hint = typing_extensions.get_type_hints(member).get("type")
    return typing_extensions.get_origin(hint) is typing.Literal and value["type"] in (
        typing_extensions.get_args(hint)
    )


def _required(hint: Any, total: bool) -> bool:
    while typing_extensions.get_origin(hint) is typing_extensions.Annotated:
        hint = typing_extensions.get_args(hint)[0]
    origin = typing_extensions.get_origin(hint)
    if origin is typing_extensions.Required:
        return True
    if origin is typing_extensions.NotRequired:
        return False
    return total


def _is_sequence(origin: Any) -> bool:
    return getattr(origin, "__name__", "") == "SequenceNotStr"


def _typeddict_errors(value: Any, tp: Any, path: str) -> list[str]:
    if not isinstance(value, dict):
        return [f"{path}: expected an object ({tp.__name__}), got {value!r}"]
    hints = typing_extensions.get_type_hints(tp, include_extras=True)
    errors = [
        f"{path}.{key}: not a field of {tp.__name__} (fields: {', '.join(sorted(hints))})"
        for key in value
        if key not in hints
    ]
    # Read from the hints: under ``from __future__ import annotations`` (the SDKs'
    # files) ``__required_keys__`` misses the ``Required[...]`` of a total=False dict.
    required = [key for key, hint in hints.items() if _required(hint, tp.__total__)]
    errors += [
        f"{path}.{key}: required by {tp.__name__}, missing" for key in required if key not in value
    ]
    for key, v in value.items():
        if key in hints:
            errors += _errors(v, hints[key], f"{path}.{key}")
    return errors


# Anthropic


def anthropic_request_type(beta: bool) -> Any:
    """The Messages request type: the beta one when a beta header is sent."""
    if beta:
        from anthropic.types.beta.message_create_params import MessageCreateParamsNonStreaming
    else:
        from anthropic.types.message_create_params import MessageCreateParamsNonStreaming
    return MessageCreateParamsNonStreaming


def anthropic_message(payload: dict[str, Any], beta: bool = False) -> dict[str, Any]:
    """A Messages reply, validated as the SDK's ``Message`` (``BetaMessage``); a toolset
    call is validated as its member's own block (``ComputerToolUseBlock``: its input
    must fit the member)."""
    if beta:
        from anthropic.types.beta import BetaMessage as Message
    else:
        from anthropic.types import ComputerToolUseBlock, Message

        for block in payload["content"]:
            if block.get("toolset_name") == "computer":
                TypeAdapter(ComputerToolUseBlock).validate_python(block)
    return Message.model_validate(payload).to_dict()


# OpenAI


def openai_request_type() -> Any:
    from openai.types.responses.response_create_params import ResponseCreateParamsNonStreaming

    return ResponseCreateParamsNonStreaming


def openai_response(payload: dict[str, Any]) -> dict[str, Any]:
    """A Responses reply, validated as the SDK's ``Response`` (the fields every
    response carries filled in)."""
    from openai.types.responses import Response

    full = {
        "object": "response",
        "created_at": 1_764_000_000,
        "status": "completed",
        "parallel_tool_calls": True,
        "tool_choice": "auto",
        "tools": [],
        "error": None,
        "incomplete_details": None,
        "instructions": None,
        "metadata": {},
        "temperature": 1.0,
        "top_p": 1.0,
    } | payload
    return Response.model_validate(full).to_dict()


# Gemini

# The generateContent body's fields and the google-genai model each one holds.
_GEMINI_BODY = {"contents": "Content", "tools": "Tool", "systemInstruction": "Content"}


def check_gemini_body(body: dict[str, Any]) -> None:
    """A generateContent body, checked against google-genai's models (their pydantic
    config forbids unknown keys; the REST names are their camelCase aliases)."""
    from google.genai import types as genai

    unknown = set(body) - set(_GEMINI_BODY)
    if unknown:
        raise ShapeError(f"body: not fields of generateContent here: {sorted(unknown)}")
    for key, model_name in _GEMINI_BODY.items():
        model = getattr(genai, model_name)
        values = body[key] if isinstance(body[key], list) else [body[key]]
        for value in values:
            model.model_validate(value)


def gemini_response(payload: dict[str, Any]) -> dict[str, Any]:
    """A generateContent reply, validated as ``GenerateContentResponse`` and written
    back with the API's camelCase names."""
    from google.genai import types as genai

    response = genai.GenerateContentResponse.model_validate(payload)
    return response.model_dump(mode="json", by_alias=True, exclude_none=True)
