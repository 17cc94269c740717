"""Which Chromium a session launches, with which switches, and the image formats it
captures.

A headless session prefers a **headless shell** (``chromium-headless-shell``: Debian's
package, or Playwright's ``chromium-headless-shell`` download): the old headless
Chromium, without the top-chrome WebUI renderer that the full browser keeps per
context in headless mode (~45 MB each, Chromium 156). A full Chromium is the fallback,
and the only choice when the browser is shown (``--headed``).
"""

from __future__ import annotations

import glob
import os
import shlex
import shutil
from pathlib import Path

BROWSER_ENV_VAR = "UIRL_CHROMIUM"
# Chromium binaries on PATH, most specific first. Debian's /usr/bin/chromium (and
# /usr/bin/chromium-headless-shell) are shell wrappers: when one is found, the real
# binary next to its libraries is used instead.
SYSTEM_BROWSER_NAMES = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")
HEADLESS_SHELL_NAMES = ("chromium-headless-shell", "chrome-headless-shell", "headless_shell")
DEBIAN_REAL_BINARIES = {
    "chromium": Path("/usr/lib/chromium/chromium"),
    "chromium-headless-shell": Path("/usr/lib/chromium/chromium-headless-shell"),
}
# Playwright's downloads (``python -m playwright install chromium-headless-shell
# chromium``), in its cache folder: found by their paths, without Playwright. Linux
# folder names, older (``chrome-linux``) and newer (``chrome-linux64``, ``-arm64``).
PLAYWRIGHT_HEADLESS_SHELL_GLOBS = (
    "chromium_headless_shell-*/chrome-*/chrome-headless-shell",
    "chromium_headless_shell-*/chrome-*/headless_shell",
)
PLAYWRIGHT_CHROMIUM_GLOBS = ("chromium-*/chrome-linux*/chrome",)


class BrowserNotFoundError(RuntimeError):
    """No Chromium could be found; the message says how to install one."""


def find_browser(explicit: str | None = None, *, headless: bool = True) -> str:
    """The Chromium executable to launch.

    Order: ``explicit``, then ``$UIRL_CHROMIUM``; for a headless session a headless
    shell (on PATH, then Playwright's download); then Playwright's downloaded Chromium,
    then a system Chromium/Chrome on PATH. Playwright itself is never imported: its
    downloads are found in its cache folder (``$PLAYWRIGHT_BROWSERS_PATH``, else
    ``~/.cache/ms-playwright``).

    Raises:
        BrowserNotFoundError: none found, or an explicit path that does not exist.
    """
    for source, path in (
        ("--browser", explicit),
        (BROWSER_ENV_VAR, os.environ.get(BROWSER_ENV_VAR)),
    ):
        if path:
            if not os.access(path, os.X_OK):
                raise BrowserNotFoundError(f"{source}={path!r} is not an executable file")
            return path
    if headless:
        shell = _on_path(HEADLESS_SHELL_NAMES) or _playwright_download(
            PLAYWRIGHT_HEADLESS_SHELL_GLOBS
        )
        if shell:
            return shell
    downloaded = _playwright_download(PLAYWRIGHT_CHROMIUM_GLOBS)
    if downloaded:
        return downloaded
    found = _on_path(SYSTEM_BROWSER_NAMES)
    if found:
        return found
    raise BrowserNotFoundError(
        "No Chromium found. Install one of: Debian/Ubuntu `apt-get install "
        "chromium-headless-shell` (headless, the lightest) or `apt-get install chromium`; "
        "elsewhere `pip install playwright && python -m playwright install "
        "chromium-headless-shell` (only its browser download is used); or point "
        f"${BROWSER_ENV_VAR} (or --browser) at a Chromium/Chrome executable."
    )


def is_headless_shell(path: str) -> bool:
    name = Path(path).name
    return "headless" in name


# Renderer flags for a static page: no smooth scrolling (a wheel scroll lands at once),
# no GPU (software compositing, as before), hinting off (the same glyphs everywhere), and
# no partial raster: a tile is redrawn whole, so a page drawn again in place (a MiniWoB++
# episode restarted in its page) has the same anti-aliased edges as a fresh one
# (partial raster left rounded corners 1-16 pixels different).
CHROMIUM_ARGS = (
    "--disable-gpu",
    "--font-render-hinting=none",
    "--disable-smooth-scrolling",
    "--disable-partial-raster",
    # Fewer processes per session (measured with 4 sessions: ~-24 MB PSS each): the GPU
    # (software compositing) and network services run in the browser process, and no
    # zygote forks the renderers (the sandbox is off anyway: cdp.py). And no SwiftShader
    # loaded for a GPU that is off anyway (-10 MB each; compositing stays software).
    "--in-process-gpu",
    "--no-zygote",
    "--enable-features=NetworkServiceInProcess2",
    "--disable-software-rasterizer",
)
# More Chromium switches, for experiments (space-separated, shell quoting).
EXTRA_ARGS_ENV_VAR = "UIRL_CHROMIUM_EXTRA_ARGS"
# Frames on demand (see the docstring of :mod:`uirl_gym.session.browser.capture`).
# Without RasterInducingScroll: a scroller the compositor scrolls without a layer of its
# own (a textarea's scrollbar pressed at pinch zoom 3) is redrawn by an impl-side
# invalidation, and when that and a commit from
# the page land in the same frame, Chromium 156's scheduler, waiting for every stage
# before it draws, waits for the new tree's activation, which waits for the draw: the
# frame is never answered (traced: ``has_pending_tree`` and
# ``active_tree_needs_first_draw``, deadline blocked). The page then scrolls as before
# that feature: its main thread repaints the scroller.
#
# And no image animation (a GIF, APNG or WebP shows its first frame): the compositor
# advances an animated image by the same impl-side invalidation, and one due in the
# frame that also commits a change from the page (text typed while a spinner turns:
# MiniWoB's flight.AA) ends in the same stall (traced: ``ImageAnimationController``
# asked for the frame; ``has_pending_tree``, ``active_tree_needs_first_draw``, deadline
# blocked). Chromium's own switches for frame control (``--disable-threaded-animation``,
# ``--disable-checker-imaging``, ``--disable-image-animation-resync``) did not prevent
# it. A still image is also what a screenshot can show the same way every time.
FRAME_CONTROL_ARGS = (
    "--enable-begin-frame-control",
    "--run-all-compositor-stages-before-draw",
    "--disable-features=RasterInducingScroll",
    "--blink-settings=imageAnimationPolicy=2",  # Blink's kImageAnimationPolicyNoAnimation
)
# "0" draws at 60 Hz with the headless shell too (for comparisons and odd apps).
FRAME_CONTROL_ENV_VAR = "UIRL_FRAMES_ON_DEMAND"


def draws_frames_on_demand(executable_path: str, headless: bool) -> bool:
    """Whether a session on this Chromium draws frames only when asked (the headless
    shell, shown nowhere, unless ``$UIRL_FRAMES_ON_DEMAND`` is "0"); a full Chromium has
    no such mode."""
    return (
        is_headless_shell(executable_path)
        and headless
        and os.environ.get(FRAME_CONTROL_ENV_VAR, "1") != "0"
    )


def session_args(frames_on_demand: bool) -> list[str]:
    """The switches a session's Chromium is launched with (besides ``cdp.BASE_SWITCHES``):
    ours, the frame-control ones, then ``$UIRL_CHROMIUM_EXTRA_ARGS``."""
    extra = shlex.split(os.environ.get(EXTRA_ARGS_ENV_VAR, ""))
    frame_args = FRAME_CONTROL_ARGS if frames_on_demand else ()
    return [*CHROMIUM_ARGS, *frame_args, *extra]


def _on_path(names: tuple[str, ...]) -> str | None:
    for name in names:
        found = shutil.which(name)
        if found:
            real = DEBIAN_REAL_BINARIES.get(name)
            if _is_shell_script(found) and real is not None and real.exists():
                return str(real)
            return found
    return None


def _playwright_browsers_dir() -> Path:
    configured = os.environ.get("PLAYWRIGHT_BROWSERS_PATH")
    if configured and configured != "0":
        return Path(configured)
    return Path.home() / ".cache" / "ms-playwright"


def _playwright_download(patterns: tuple[str, ...]) -> str | None:
    """A browser Playwright downloaded, the newest revision first."""
    root = _playwright_browsers_dir()
    for pattern in patterns:
        found = glob.glob(str(root / pattern))
        for path in sorted(found, key=_revision, reverse=True):
            if os.access(path, os.X_OK):
                return path
    return None


def _revision(path: str) -> int:
    """The revision of a Playwright download (``chromium-1200/...``: 1200)."""
    folder = Path(path).relative_to(_playwright_browsers_dir()).parts[0]
    number = folder.rpartition("-")[2]
    return int(number) if number.isdigit() else -1


def _is_shell_script(path: str) -> bool:
    with open(path, "rb") as f:
        return f.read(2) == b"#!"


# Runs in every document and frame before the page's scripts (both backends). The
# headless browser draws no popup widget (a drop-down <select>'s list, a date, time or
# colour picker), and one left open stalls frames on demand: the next
# ``HeadlessExperimental.beginFrame`` that asks for a screenshot never answers (measured:
# Chromium 156's headless shell; the click itself returns), so ``/act`` waited out its
# 30 s and the session was stuck ("Another frame is pending"). So no popup opens: a
# press on a drop-down select or a colour field focuses it, the keys that open one are
# not given to it, date and time fields lose their picker button, and ``showPicker()``
# does nothing; the keyboard picks (arrows and type-ahead in a select, typing a date).
POPUP_GUARD_JS = """(() => {
  const PICKERS = "input[type=date], input[type=time], input[type=datetime-local], " +
    "input[type=month], input[type=week], input[type=color]";
  const dropDown = (el) => el instanceof HTMLSelectElement && !el.multiple && el.size <= 1;
  addEventListener("mousedown", (event) => {
    const t = event.target;
    const select = t && t.closest ? t.closest("select") : null;
    if ((select && dropDown(select)) || (t && t.matches && t.matches("input[type=color]"))) {
      event.preventDefault();
      (select || t).focus();
    }
  }, true);
  // A colour field opens its chooser on activation (a click, or the click that space or
  // Enter makes).
  addEventListener("click", (event) => {
    const t = event.target;
    if (t && t.matches && t.matches("input[type=color]")) event.preventDefault();
  }, true);
  addEventListener("keydown", (event) => {
    const t = event.target;
    if (!(t instanceof Element)) return;
    const opens = event.key === "F4" ||
      (event.altKey && (event.key === "ArrowDown" || event.key === "ArrowUp"));
    const select = dropDown(t);
    // A date or time field opens its picker on space too, with any modifier (the stall
    // hunt: shift+space, or a typed space, on MiniWoB's enter-time).
    const picker = t.matches(PICKERS);
    if ((opens && (select || picker)) || (picker && event.key === " ") ||
        (select && (event.key === " " || event.key === "Enter"))) {
      event.preventDefault();
    }
  }, true);
  // No tab or window opens either (one page per session, the one on the screen): a
  // link activated with Shift, Ctrl or Meta (a click, or Enter on a focused link), a
  // middle click, a link or form whose target is a new window, and window.open. The
  // page's own handlers still run; only the browser's default (the new tab) is
  // cancelled, as a popup blocker would. Measured before: each Shift+Enter on a focused
  // link opened a background tab (a renderer each).
  const SAME_WINDOW = ["", "_self", "_parent", "_top"];
  const newWindow = (target) => !SAME_WINDOW.includes((target || "").toLowerCase());
  const guardLink = (event) => {
    const t = event.target;
    const link = t && t.closest ? t.closest("a[href], area[href]") : null;
    if (!link) return;
    const modified = event.shiftKey || event.ctrlKey || event.metaKey || event.button === 1;
    if (modified || newWindow(link.target)) event.preventDefault();
  };
  addEventListener("click", guardLink, true);
  addEventListener("auxclick", guardLink, true);
  addEventListener("submit", (event) => {
    const submitter = event.submitter;
    const target = submitter && submitter.hasAttribute("formtarget")
      ? submitter.getAttribute("formtarget") : event.target.target;
    if (newWindow(target)) event.preventDefault();
  }, true);
  window.open = function () { return null; };
  for (const proto of [HTMLInputElement.prototype, HTMLSelectElement.prototype]) {
    if (proto.showPicker) proto.showPicker = function () {};
  }
  const sheet = new CSSStyleSheet();
  sheet.replaceSync("input::-webkit-calendar-picker-indicator { display: none !important; }");
  document.adoptedStyleSheets = [...document.adoptedStyleSheets, sheet];
})();"""
