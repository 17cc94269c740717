"""Record a person's demonstrations through the env: ``python -m uirl_agents.recorder``.

    python -m uirl_agents.recorder --task simple_data_entry --out runs/demos --episodes 5

starts a session (the local runtime, as :class:`~uirl_gym.env.UIEnv` does, or the one at
``--session-url``) and serves a recorder page on 127.0.0.1: the live screenshot scaled
to fit, the instruction, the episode's reward and progress, and three controls (Finish:
declare the task done; New episode: drop this one and start another; Stop). The page
(``recorder/static/recorder.html``) turns what the person does on the screenshot into env actions:
a click, double or triple click, right click, wheel scroll, a drag, typed text (one
``type`` per run of characters) and key combinations (``keys``, e.g. ``ctrl+a``).

Each action goes through :meth:`UIEnv.step`, so rewards, ``is_success`` and the saved
trajectories are what a policy's would be; each step is written in a model's format
(``--format``, as the scripted experts' demonstrations are:
:meth:`~uirl_agents.policies.context.EpisodeContexts.demonstrate`), so that
``train_rs.py`` fine-tunes on the folder (``rs.demonstrations``) and the replay viewer
(:mod:`uirl_agents.episodes.viewer`) shows it like any run.

The package: :mod:`~uirl_agents.recorder.recording` (:class:`Recorder`: the person's
actions through the env, each episode written as it ends), :mod:`~uirl_agents.recorder.server`
(the page and its JSON API on 127.0.0.1; :func:`record`) and ``__main__`` (the command line).
"""

from uirl_agents.recorder.recording import (
    Recorder,
    RecorderAddressError,
    RecorderConfig,
    RecorderError,
    RecorderFinishedError,
)
from uirl_agents.recorder.server import RecorderServer, record

__all__ = [
    "Recorder",
    "RecorderAddressError",
    "RecorderConfig",
    "RecorderError",
    "RecorderFinishedError",
    "RecorderServer",
    "record",
]
