"""Trajectories as Hugging Face datasets (docs/datasets.md).

    python -m uirl_agents.dataset export RUN_DIR OUT_DIR [--push-to-hub USER/NAME]

turns an evaluate run, a training run's trajectories or a folder of recordings into a
dataset of Parquet files with two configurations, ``episodes`` (one row per episode,
screenshots included) and ``steps`` (one row per step in chat form, for SFT), and a
dataset card; and pushes it to the Hub.

The package: :mod:`~uirl_agents.dataset.runs` (what RUN_DIR holds, checked),
:mod:`~uirl_agents.dataset.rows` (the rows and their features),
:mod:`~uirl_agents.dataset.export` (:func:`~uirl_agents.dataset.export.export_dataset`:
the streaming export), :mod:`~uirl_agents.dataset.card` (the card),
:mod:`~uirl_agents.dataset.hub` (:func:`~uirl_agents.dataset.hub.push_dataset`),
:mod:`~uirl_agents.dataset.load` (episodes back, for training),
:mod:`~uirl_agents.dataset.folder` (a dataset folder's names; light: no ``datasets``
import) and ``__main__`` (the command line). Import from the modules: this package
imports nothing, so that a trainer's config check stays light.
"""
