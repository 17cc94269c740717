"""Write a picture of the recorder page (docs/images/recorder.png) mid-episode.

python scripts/make_recorder_screenshot.py [--out docs/images/recorder.png]

A real recorder on a local session, its page in headless Chromium: a cell clicked, a
field typed in, so that the picture shows a step's UI-TARS text and the reward.
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

from PIL import Image
from playwright.sync_api import Page, sync_playwright

from uirl_agents.recorder import Recorder, RecorderConfig, RecorderServer
from uirl_gym.actions import SCREEN_HEIGHT, SCREEN_WIDTH
from uirl_gym.env import UIEnv
from uirl_gym.session.browser.chromium import find_browser
from uirl_gym.tasks.expert import box_centre


def click_screen(page: Page, x: int, y: int) -> None:
    box = page.locator("#shot").bounding_box()
    page.mouse.click(
        box["x"] + x * box["width"] / SCREEN_WIDTH, box["y"] + y * box["height"] / SCREEN_HEIGHT
    )


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", type=Path, default=Path("docs/images/recorder.png"))
    p.add_argument("--width", type=int, default=960, help="the picture's width in pixels")
    args = p.parse_args()
    env = UIEnv()
    with tempfile.TemporaryDirectory() as tmp:
        config = RecorderConfig(out_dir=Path(tmp), seed=0, options={"rows": [3, 41]})
        recorder = Recorder(config, env)
        recorder.start()
        server = RecorderServer(("127.0.0.1", 0))
        server.start(recorder)
        try:
            with sync_playwright() as pw:
                browser = pw.chromium.launch(executable_path=find_browser(headless=True))
                page = browser.new_page(viewport={"width": 1280, "height": 600})
                page.goto(server.url)
                page.wait_for_function("document.getElementById('shot').naturalWidth > 0")
                o = env.oracle()
                click_screen(page, *box_centre(o["inputs"]["first_name"]["box"]))
                page.keyboard.type(o["target_values"][0][0])
                click_screen(page, *box_centre(o["inputs"]["last_name"]["box"]))
                page.wait_for_function("window.recorderIdle()")
                page.wait_for_function(
                    "document.getElementById('shot').src.endsWith("
                    "'v=' + document.body.dataset.version) && "
                    "document.getElementById('shot').complete"
                )
                png = Path(tmp) / "page.png"
                page.screenshot(path=str(png))
                browser.close()
            image = Image.open(png).convert("RGB")
        finally:
            recorder.close()
            server.stop()
            env.close()
    height = round(image.height * args.width / image.width)
    image = image.resize((args.width, height), Image.LANCZOS)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    image.save(args.out, optimize=True)
    print(f"wrote {args.out} ({args.out.stat().st_size // 1024} KB)")


if __name__ == "__main__":
    main()
