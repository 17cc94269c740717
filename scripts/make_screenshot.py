"""Write a picture of the env's screen (docs/images/screen.png) from a real session.

python scripts/make_screenshot.py [--out docs/images/screen.png] [--full-size]
"""

from __future__ import annotations

import argparse
from pathlib import Path

from PIL import Image

from uirl_gym.actions import Action, ActionType
from uirl_gym.env import UIEnv


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", type=Path, default=Path("docs/images/screen.png"))
    p.add_argument("--full-size", action="store_true", help="1280x800 instead of 640x400")
    args = p.parse_args()
    env = UIEnv()
    try:
        env.reset(seed=0, options={"rows": [3, 41]})
        o = env.oracle()
        # Mid-task: a cell selected, one field filled.
        x, y, w, h = o["visible_rows"][4]["cells"][0]
        env.step(Action(ActionType.LEFT_CLICK, x + w // 2, y + h // 2))
        x, y, w, h = o["inputs"]["first_name"]["box"]
        env.step(Action(ActionType.LEFT_CLICK, x + w // 2, y + h // 2))
        obs, *_ = env.step(Action(ActionType.TYPE, text=o["target_values"][0][0]))
    finally:
        env.close()
    image = Image.fromarray(obs["screenshot"])
    if not args.full_size:
        image = image.resize((640, 400), Image.LANCZOS)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    image.save(args.out, optimize=True)
    print(f"wrote {args.out} ({args.out.stat().st_size // 1024} KB)")


if __name__ == "__main__":
    main()
