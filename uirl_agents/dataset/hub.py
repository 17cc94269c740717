"""An exported dataset on the Hugging Face Hub: push it, fetch it back.

:func:`push_dataset` goes through ``huggingface_hub`` (``HfApi.create_repo``, private
unless asked otherwise; ``upload_folder``; ``upload_file``), with the token of
``HF_TOKEN`` or ``hf auth login``, at ``HF_ENDPOINT`` when set. In two steps:

1. the Parquet files and ``uirl_export.json``, and the deletion of Parquet files an
   earlier push left that this export does not have (else ``train-*`` would read
   them too). ``upload_folder`` resumes by itself: a file the repo already holds with
   the same content is not sent again, and a large folder is committed in parts, so a
   push cut short, run again, sends only what is missing;
2. the card (``README.md``, rendered for the repo: ``load_dataset("USER/NAME", ...)``),
   last, so that a repo with a card is a repo with all its data.

:func:`download_dataset` fetches a configuration's files into the local Hub cache
(``snapshot_download``) and returns the folder, which reads like a local export.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path

from uirl_agents.dataset.card import ExportSummary, render_card
from uirl_agents.dataset.folder import (
    CARD_FILE,
    EPISODES,
    STEPS,
    SUMMARY_FILE,
    HubDataset,
)

logger = logging.getLogger(__name__)

REPO_TYPE = "dataset"


class HubTokenMissingError(RuntimeError):
    """A push was asked for but no Hub token can be found."""

    def __init__(self, repo_id: str) -> None:
        super().__init__(
            f"pushing to {repo_id!r} needs a Hugging Face token and none is set: export "
            "HF_TOKEN (a write token) or run `hf auth login` (or pass --token)"
        )
        self.repo_id = repo_id


class NotAnExportError(ValueError):
    """A folder pushed that is not an exported dataset."""


def require_token(repo_id: str, token: str | None = None) -> None:
    """Fail before a long export, not after it, when its push could not authenticate.

    Raises:
        HubTokenMissingError: no ``token``, no ``HF_TOKEN``, no saved login.
    """
    from huggingface_hub import get_token

    if token is None and get_token() is None:
        raise HubTokenMissingError(repo_id)


def push_dataset(
    out_dir: str | os.PathLike[str],
    repo_id: str,
    *,
    private: bool = True,
    token: str | None = None,
) -> str:
    """Upload the exported dataset in ``out_dir`` to the dataset repo ``repo_id``.

    Args:
        out_dir: an export's folder (:func:`~uirl_agents.dataset.export.export_dataset`).
        repo_id: ``USER/NAME`` (created if missing).
        private: create the repo private (an existing repo keeps its visibility).
        token: a Hub token; None: ``HF_TOKEN`` or the saved login.

    Returns:
        The URL of the card's commit.

    Raises:
        NotAnExportError: ``out_dir`` holds no export.
        HubTokenMissingError: no token.
        huggingface_hub.errors.HfHubHTTPError: the Hub refused (run it again to resume).
    """
    from huggingface_hub import HfApi

    folder = Path(out_dir)
    if not (folder / SUMMARY_FILE).is_file():
        raise NotAnExportError(
            f"{folder}: no {SUMMARY_FILE}: expected the OUT_DIR of `python -m "
            "uirl_agents.dataset export`"
        )
    require_token(repo_id, token)
    summary = ExportSummary.load(folder / SUMMARY_FILE)
    api = HfApi(token=token)
    api.create_repo(repo_id, repo_type=REPO_TYPE, private=private, exist_ok=True)
    data = [f"{name}/*.parquet" for name in (EPISODES, STEPS)]
    logger.info("pushing %s to %s (data, then the card)", folder, repo_id)
    api.upload_folder(
        repo_id=repo_id,
        repo_type=REPO_TYPE,
        folder_path=folder,
        allow_patterns=[*data, SUMMARY_FILE],
        delete_patterns=data,
        commit_message=f"uirl trajectories: the data of {Path(summary.source).name}",
    )
    commit = api.upload_file(
        path_or_fileobj=render_card(summary, repo_id).encode(),
        path_in_repo=CARD_FILE,
        repo_id=repo_id,
        repo_type=REPO_TYPE,
        commit_message="uirl trajectories: the dataset card",
    )
    logger.info("pushed to %s", commit.commit_url)
    return commit.commit_url


def download_dataset(hub: HubDataset, config: str = EPISODES, token: str | None = None) -> Path:
    """The files of ``hub``'s configuration ``config`` in the local Hub cache (fetched
    when missing); the folder reads like a local export."""
    from huggingface_hub import snapshot_download

    path = snapshot_download(
        hub.repo_id,
        repo_type=REPO_TYPE,
        revision=hub.revision,
        allow_patterns=[f"{config}/*.parquet", CARD_FILE, SUMMARY_FILE],
        token=token,
    )
    return Path(path)
