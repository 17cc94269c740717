"""Key-name vocabularies the session server must accept (test data)."""

from __future__ import annotations

# pyautogui 0.9.54's KEYBOARD_KEYS, verbatim: the names upstream's ``keys`` accepts.
PYAUTOGUI_KEYBOARD_KEYS = [
    "\t", "\n", "\r", " ", "!", '"', "#", "$", "%", "&", "'", "(", ")", "*", "+", ",",
    "-", ".", "/", "0", "1", "2", "3", "4", "5", "6", "7", "8", "9", ":", ";", "<", "=",
    ">", "?", "@", "[", "\\", "]", "^", "_", "`", "a", "b", "c", "d", "e", "f", "g", "h",
    "i", "j", "k", "l", "m", "n", "o", "p", "q", "r", "s", "t", "u", "v", "w", "x", "y",
    "z", "{", "|", "}", "~", "accept", "add", "alt", "altleft", "altright", "apps",
    "backspace", "browserback", "browserfavorites", "browserforward", "browserhome",
    "browserrefresh", "browsersearch", "browserstop", "capslock", "clear", "convert",
    "ctrl", "ctrlleft", "ctrlright", "decimal", "del", "delete", "divide", "down", "end",
    "enter", "esc", "escape", "execute", "f1", "f10", "f11", "f12", "f13", "f14", "f15",
    "f16", "f17", "f18", "f19", "f2", "f20", "f21", "f22", "f23", "f24", "f3", "f4", "f5",
    "f6", "f7", "f8", "f9", "final", "fn", "hanguel", "hangul", "hanja", "help", "home",
    "insert", "junja", "kana", "kanji", "launchapp1", "launchapp2", "launchmail",
    "launchmediaselect", "left", "modechange", "multiply", "nexttrack", "nonconvert",
    "num0", "num1", "num2", "num3", "num4", "num5", "num6", "num7", "num8", "num9",
    "numlock", "pagedown", "pageup", "pause", "pgdn", "pgup", "playpause", "prevtrack",
    "print", "printscreen", "prntscrn", "prtsc", "prtscr", "return", "right", "scrolllock",
    "select", "separator", "shift", "shiftleft", "shiftright", "sleep", "space", "stop",
    "subtract", "tab", "up", "volumedown", "volumemute", "volumeup", "win", "winleft",
    "winright", "yen", "command", "option", "optionleft", "optionright",
]  # fmt: skip
# Playwright's US keyboard layout (key names and codes it accepts in keyboard.press).
PLAYWRIGHT_LAYOUT = {
    "Escape", "Backspace", "Tab", "Enter", "CapsLock", "Space", "ContextMenu",
    "PrintScreen", "ScrollLock", "Pause", "PageUp", "PageDown", "Insert", "Delete",
    "Home", "End", "ArrowLeft", "ArrowUp", "ArrowRight", "ArrowDown", "NumLock",
    "NumpadDivide", "NumpadMultiply", "NumpadSubtract", "NumpadAdd", "NumpadDecimal",
    "NumpadEnter", "AudioVolumeMute", "AudioVolumeDown", "AudioVolumeUp", "MediaTrackNext",
    "MediaTrackPrevious", "MediaPlayPause", "Shift", "Control", "Alt", "Meta", "ShiftLeft",
    "ShiftRight", "ControlLeft", "ControlRight", "AltLeft", "AltRight", "AltGraph",
    "MetaLeft", "MetaRight", *(f"Numpad{i}" for i in range(10)),
    *(f"F{i}" for i in range(1, 13)),
}  # fmt: skip
