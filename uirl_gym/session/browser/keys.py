"""Playwright's US keyboard layout, for sending key events over CDP without Playwright.

The table is Playwright's ``usKeyboardLayout.ts`` (Apache-2.0, Copyright Microsoft
Corporation), turned into Python; :func:`describe` follows Playwright's
``buildLayoutClosure`` and ``Keyboard._keyDescriptionForString``, so that a key pressed
through either backend reaches the page as the same DOM event.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

MODIFIERS = ("Alt", "Control", "Meta", "Shift")
# CDP ``Input.dispatchKeyEvent`` modifier bits.
MODIFIER_BITS = {"Alt": 1, "Control": 2, "Meta": 4, "Shift": 8}

# code -> keyCode, key, and optionally shiftKeyCode, shiftKey, text, location,
# keyCodeWithoutLocation.
US_LAYOUT: dict[str, dict[str, Any]] = {
    'Escape': {'keyCode': 27, 'key': 'Escape'},
    'F1': {'keyCode': 112, 'key': 'F1'},
    'F2': {'keyCode': 113, 'key': 'F2'},
    'F3': {'keyCode': 114, 'key': 'F3'},
    'F4': {'keyCode': 115, 'key': 'F4'},
    'F5': {'keyCode': 116, 'key': 'F5'},
    'F6': {'keyCode': 117, 'key': 'F6'},
    'F7': {'keyCode': 118, 'key': 'F7'},
    'F8': {'keyCode': 119, 'key': 'F8'},
    'F9': {'keyCode': 120, 'key': 'F9'},
    'F10': {'keyCode': 121, 'key': 'F10'},
    'F11': {'keyCode': 122, 'key': 'F11'},
    'F12': {'keyCode': 123, 'key': 'F12'},
    'Backquote': {'keyCode': 192, 'shiftKey': '~', 'key': '`'},
    'Digit1': {'keyCode': 49, 'shiftKey': '!', 'key': '1'},
    'Digit2': {'keyCode': 50, 'shiftKey': '@', 'key': '2'},
    'Digit3': {'keyCode': 51, 'shiftKey': '#', 'key': '3'},
    'Digit4': {'keyCode': 52, 'shiftKey': '$', 'key': '4'},
    'Digit5': {'keyCode': 53, 'shiftKey': '%', 'key': '5'},
    'Digit6': {'keyCode': 54, 'shiftKey': '^', 'key': '6'},
    'Digit7': {'keyCode': 55, 'shiftKey': '&', 'key': '7'},
    'Digit8': {'keyCode': 56, 'shiftKey': '*', 'key': '8'},
    'Digit9': {'keyCode': 57, 'shiftKey': '(', 'key': '9'},
    'Digit0': {'keyCode': 48, 'shiftKey': ')', 'key': '0'},
    'Minus': {'keyCode': 189, 'shiftKey': '_', 'key': '-'},
    'Equal': {'keyCode': 187, 'shiftKey': '+', 'key': '='},
    'Backslash': {'keyCode': 220, 'shiftKey': '|', 'key': '\\'},
    'Backspace': {'keyCode': 8, 'key': 'Backspace'},
    'Tab': {'keyCode': 9, 'key': 'Tab'},
    'KeyQ': {'keyCode': 81, 'shiftKey': 'Q', 'key': 'q'},
    'KeyW': {'keyCode': 87, 'shiftKey': 'W', 'key': 'w'},
    'KeyE': {'keyCode': 69, 'shiftKey': 'E', 'key': 'e'},
    'KeyR': {'keyCode': 82, 'shiftKey': 'R', 'key': 'r'},
    'KeyT': {'keyCode': 84, 'shiftKey': 'T', 'key': 't'},
    'KeyY': {'keyCode': 89, 'shiftKey': 'Y', 'key': 'y'},
    'KeyU': {'keyCode': 85, 'shiftKey': 'U', 'key': 'u'},
    'KeyI': {'keyCode': 73, 'shiftKey': 'I', 'key': 'i'},
    'KeyO': {'keyCode': 79, 'shiftKey': 'O', 'key': 'o'},
    'KeyP': {'keyCode': 80, 'shiftKey': 'P', 'key': 'p'},
    'BracketLeft': {'keyCode': 219, 'shiftKey': '{', 'key': '['},
    'BracketRight': {'keyCode': 221, 'shiftKey': '}', 'key': ']'},
    'CapsLock': {'keyCode': 20, 'key': 'CapsLock'},
    'KeyA': {'keyCode': 65, 'shiftKey': 'A', 'key': 'a'},
    'KeyS': {'keyCode': 83, 'shiftKey': 'S', 'key': 's'},
    'KeyD': {'keyCode': 68, 'shiftKey': 'D', 'key': 'd'},
    'KeyF': {'keyCode': 70, 'shiftKey': 'F', 'key': 'f'},
    'KeyG': {'keyCode': 71, 'shiftKey': 'G', 'key': 'g'},
    'KeyH': {'keyCode': 72, 'shiftKey': 'H', 'key': 'h'},
    'KeyJ': {'keyCode': 74, 'shiftKey': 'J', 'key': 'j'},
    'KeyK': {'keyCode': 75, 'shiftKey': 'K', 'key': 'k'},
    'KeyL': {'keyCode': 76, 'shiftKey': 'L', 'key': 'l'},
    'Semicolon': {'keyCode': 186, 'shiftKey': ':', 'key': ';'},
    'Quote': {'keyCode': 222, 'shiftKey': '"', 'key': "'"},
    'Enter': {'keyCode': 13, 'key': 'Enter', 'text': '\r'},
    'ShiftLeft': {'keyCode': 160, 'keyCodeWithoutLocation': 16, 'key': 'Shift', 'location': 1},
    'KeyZ': {'keyCode': 90, 'shiftKey': 'Z', 'key': 'z'},
    'KeyX': {'keyCode': 88, 'shiftKey': 'X', 'key': 'x'},
    'KeyC': {'keyCode': 67, 'shiftKey': 'C', 'key': 'c'},
    'KeyV': {'keyCode': 86, 'shiftKey': 'V', 'key': 'v'},
    'KeyB': {'keyCode': 66, 'shiftKey': 'B', 'key': 'b'},
    'KeyN': {'keyCode': 78, 'shiftKey': 'N', 'key': 'n'},
    'KeyM': {'keyCode': 77, 'shiftKey': 'M', 'key': 'm'},
    'Comma': {'keyCode': 188, 'shiftKey': '<', 'key': ','},
    'Period': {'keyCode': 190, 'shiftKey': '>', 'key': '.'},
    'Slash': {'keyCode': 191, 'shiftKey': '?', 'key': '/'},
    'ShiftRight': {'keyCode': 161, 'keyCodeWithoutLocation': 16, 'key': 'Shift', 'location': 2},
    'ControlLeft': {'keyCode': 162, 'keyCodeWithoutLocation': 17, 'key': 'Control', 'location': 1},
    'MetaLeft': {'keyCode': 91, 'key': 'Meta', 'location': 1},
    'AltLeft': {'keyCode': 164, 'keyCodeWithoutLocation': 18, 'key': 'Alt', 'location': 1},
    'Space': {'keyCode': 32, 'key': ' '},
    'AltRight': {'keyCode': 165, 'keyCodeWithoutLocation': 18, 'key': 'Alt', 'location': 2},
    'AltGraph': {'keyCode': 225, 'key': 'AltGraph'},
    'MetaRight': {'keyCode': 92, 'key': 'Meta', 'location': 2},
    'ContextMenu': {'keyCode': 93, 'key': 'ContextMenu'},
    'ControlRight': {'keyCode': 163, 'keyCodeWithoutLocation': 17, 'key': 'Control', 'location': 2},
    'PrintScreen': {'keyCode': 44, 'key': 'PrintScreen'},
    'ScrollLock': {'keyCode': 145, 'key': 'ScrollLock'},
    'Pause': {'keyCode': 19, 'key': 'Pause'},
    'PageUp': {'keyCode': 33, 'key': 'PageUp'},
    'PageDown': {'keyCode': 34, 'key': 'PageDown'},
    'Insert': {'keyCode': 45, 'key': 'Insert'},
    'Delete': {'keyCode': 46, 'key': 'Delete'},
    'Home': {'keyCode': 36, 'key': 'Home'},
    'End': {'keyCode': 35, 'key': 'End'},
    'ArrowLeft': {'keyCode': 37, 'key': 'ArrowLeft'},
    'ArrowUp': {'keyCode': 38, 'key': 'ArrowUp'},
    'ArrowRight': {'keyCode': 39, 'key': 'ArrowRight'},
    'ArrowDown': {'keyCode': 40, 'key': 'ArrowDown'},
    'AudioVolumeMute': {'keyCode': 173, 'key': 'AudioVolumeMute'},
    'AudioVolumeDown': {'keyCode': 174, 'key': 'AudioVolumeDown'},
    'AudioVolumeUp': {'keyCode': 175, 'key': 'AudioVolumeUp'},
    'MediaTrackNext': {'keyCode': 176, 'key': 'MediaTrackNext'},
    'MediaTrackPrevious': {'keyCode': 177, 'key': 'MediaTrackPrevious'},
    'MediaPlayPause': {'keyCode': 179, 'key': 'MediaPlayPause'},
    'NumLock': {'keyCode': 144, 'key': 'NumLock'},
    'NumpadDivide': {'keyCode': 111, 'key': '/', 'location': 3},
    'NumpadMultiply': {'keyCode': 106, 'key': '*', 'location': 3},
    'NumpadSubtract': {'keyCode': 109, 'key': '-', 'location': 3},
    'Numpad7': {'keyCode': 36, 'shiftKeyCode': 103, 'key': 'Home', 'shiftKey': '7', 'location': 3},
    'Numpad8': {'keyCode': 38, 'shiftKeyCode': 104, 'key': 'ArrowUp', 'shiftKey': '8', 'location': 3},
    'Numpad9': {'keyCode': 33, 'shiftKeyCode': 105, 'key': 'PageUp', 'shiftKey': '9', 'location': 3},
    'Numpad4': {'keyCode': 37, 'shiftKeyCode': 100, 'key': 'ArrowLeft', 'shiftKey': '4', 'location': 3},
    'Numpad5': {'keyCode': 12, 'shiftKeyCode': 101, 'key': 'Clear', 'shiftKey': '5', 'location': 3},
    'Numpad6': {'keyCode': 39, 'shiftKeyCode': 102, 'key': 'ArrowRight', 'shiftKey': '6', 'location': 3},
    'NumpadAdd': {'keyCode': 107, 'key': '+', 'location': 3},
    'Numpad1': {'keyCode': 35, 'shiftKeyCode': 97, 'key': 'End', 'shiftKey': '1', 'location': 3},
    'Numpad2': {'keyCode': 40, 'shiftKeyCode': 98, 'key': 'ArrowDown', 'shiftKey': '2', 'location': 3},
    'Numpad3': {'keyCode': 34, 'shiftKeyCode': 99, 'key': 'PageDown', 'shiftKey': '3', 'location': 3},
    'Numpad0': {'keyCode': 45, 'shiftKeyCode': 96, 'key': 'Insert', 'shiftKey': '0', 'location': 3},
    'NumpadDecimal': {'keyCode': 46, 'shiftKeyCode': 110, 'key': 'Delete', 'shiftKey': '.', 'location': 3},
    'NumpadEnter': {'keyCode': 13, 'key': 'Enter', 'text': '\r', 'location': 3},
}  # fmt: skip
# Playwright's aliases: these names press the key of the code they map to.
_ALIASES = {"ShiftLeft": ("Shift",), "ControlLeft": ("Control",), "AltLeft": ("Alt",),
            "MetaLeft": ("Meta",), "Enter": ("\n", "\r")}  # fmt: skip


@dataclass(frozen=True)
class KeyDescription:
    """What one key sends: DOM ``key``/``code``, key codes, the text it inserts."""

    key: str
    key_code: int
    key_code_without_location: int
    code: str
    text: str
    location: int
    shifted: KeyDescription | None = None


def _build(layout: dict[str, dict[str, Any]]) -> dict[str, KeyDescription]:
    result: dict[str, KeyDescription] = {}
    for code, d in layout.items():
        key = d.get("key", "")
        plain = KeyDescription(
            key=key,
            key_code=d.get("keyCode", 0),
            key_code_without_location=d.get("keyCodeWithoutLocation") or d.get("keyCode", 0),
            code=code,
            text=key if len(key) == 1 else d.get("text", ""),
            location=d.get("location", 0),
        )
        shifted = None
        if d.get("shiftKey"):
            shift_code = d.get("shiftKeyCode")
            shifted = replace(
                plain,
                key=d["shiftKey"],
                text=d["shiftKey"],
                key_code=shift_code or plain.key_code,
                key_code_without_location=shift_code or plain.key_code_without_location,
            )
        result[code] = replace(plain, shifted=shifted)
        for alias in _ALIASES.get(code, ()):
            result[alias] = plain
        if plain.location:
            continue
        if len(plain.key) == 1:
            result[plain.key] = plain
        if shifted is not None:
            result[shifted.key] = shifted
    return result


LAYOUT = _build(US_LAYOUT)


class UnknownKeyError(ValueError):
    """A key name the US layout does not have (the message matches Playwright's)."""


def describe(key: str, held_modifiers: set[str]) -> KeyDescription:
    """The event fields for ``key`` pressed while ``held_modifiers`` are down.

    As in Playwright: Shift picks the shifted key; any other modifier held means the key
    inserts no text (a shortcut such as Control+C).

    Raises:
        UnknownKeyError: the layout has no such key.
    """
    description = LAYOUT.get(key)
    if description is None:
        raise UnknownKeyError(f'Unknown key: "{key}"')
    if "Shift" in held_modifiers and description.shifted is not None:
        description = description.shifted
    if len(held_modifiers) > 1 or (held_modifiers and "Shift" not in held_modifiers):
        description = replace(description, text="")
    return description


def modifier_mask(held_modifiers: set[str]) -> int:
    return sum(MODIFIER_BITS[m] for m in held_modifiers)
