"""Session pods: the manifest from the template, and the clean-up of orphaned ones.

A pod is made from ``uirl_gym/deploy/session-pod.yaml`` (or a copy named by
``template_path``); the runtime fills in the per-session fields. Every pod carries its
owner (``uirl/run-id``) and an expiry time (``uirl/expires-at``) that its runtime
renews while it runs, so that pods of a crashed trainer are found and deleted.
"""

from __future__ import annotations

import copy
import logging
from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from importlib import resources
from pathlib import Path
from typing import Any

import yaml

from uirl_gym.runtimes.k8s_api import (
    APP_LABEL,
    APP_NAME,
    CONTAINER_NAME,
    EXPIRES_ANNOTATION,
    POD_NAME_PREFIX,
    PORT_NAME,
    RUN_LABEL,
    SESSION_LABEL,
    TTL_ANNOTATION,
    PodApi,
    PodApiError,
    session_selector,
)

logger = logging.getLogger(__name__)

TEMPLATE_PACKAGE = "uirl_gym.deploy"
TEMPLATE_NAME = "session-pod.yaml"


class PodTemplateError(ValueError):
    """The pod template is not a usable Pod manifest."""


def load_template(path: str | None = None) -> dict[str, Any]:
    """The pod template as a dict: ``path``, else the one shipped in ``uirl_gym/deploy``.

    Raises:
        PodTemplateError: not a Pod with at least one container.
    """
    if path is None:
        text = resources.files(TEMPLATE_PACKAGE).joinpath(TEMPLATE_NAME).read_text()
        source = f"{TEMPLATE_PACKAGE}/{TEMPLATE_NAME}"
    else:
        text = Path(path).read_text()
        source = path
    manifest = yaml.safe_load(text)
    if not isinstance(manifest, dict) or manifest.get("kind") != "Pod":
        kind = manifest.get("kind") if isinstance(manifest, dict) else type(manifest).__name__
        raise PodTemplateError(f"{source}: expected a manifest of kind Pod, got {kind!r}")
    if not (manifest.get("spec") or {}).get("containers"):
        raise PodTemplateError(f"{source}: expected spec.containers with one container, got none")
    return manifest


def server_command(session_id: str, task: str, port: int) -> list[str]:
    """The container's command: the session server, as the local runtime starts it."""
    return [
        "python",
        "-m",
        "uirl_gym.server",
        "--host",
        "0.0.0.0",
        "--port",
        str(port),
        "--session-id",
        session_id,
        "--task",
        task,
        "--log-level",
        "warning",
    ]


def expiry(ttl_s: float, now: datetime | None = None) -> str:
    """The ``uirl/expires-at`` value ``ttl_s`` from now (RFC 3339, UTC)."""
    now = now or datetime.now(UTC)
    return (now + timedelta(seconds=ttl_s)).isoformat(timespec="seconds")


def build_pod_manifest(
    template: Mapping[str, Any],
    *,
    session_id: str,
    run_id: str,
    image: str,
    task: str,
    port: int,
    ttl_s: float,
    image_pull_policy: str | None = None,
    resources_override: Mapping[str, Mapping[str, str | None]] | None = None,
) -> dict[str, Any]:
    """The pod of one session: the template with the per-session fields set.

    Args:
        resources_override: ``{"requests": {"cpu": "1"}, "limits": {"memory": None}}``;
            a value of None removes that entry from the template's resources.
    """
    pod = copy.deepcopy(dict(template))
    meta = pod.setdefault("metadata", {})
    meta.pop("generateName", None)
    meta["name"] = POD_NAME_PREFIX + session_id
    meta["labels"] = {
        **(meta.get("labels") or {}),
        APP_LABEL: APP_NAME,
        SESSION_LABEL: session_id,
        RUN_LABEL: run_id,
    }
    meta["annotations"] = {
        **(meta.get("annotations") or {}),
        EXPIRES_ANNOTATION: expiry(ttl_s),
        TTL_ANNOTATION: str(int(ttl_s)),
    }
    containers = pod["spec"]["containers"]
    container = next((c for c in containers if c.get("name") == CONTAINER_NAME), containers[0])
    container["image"] = image
    if image_pull_policy:
        container["imagePullPolicy"] = image_pull_policy
    container["command"] = server_command(session_id, task, port)
    container.pop("args", None)
    ports = [p for p in container.get("ports") or [] if p.get("name") != PORT_NAME]
    container["ports"] = [{"name": PORT_NAME, "containerPort": port, "protocol": "TCP"}, *ports]
    for kind, values in (resources_override or {}).items():
        section = container.setdefault("resources", {}).setdefault(kind, {})
        for resource, value in values.items():
            if value is None:
                section.pop(resource, None)
            else:
                section[resource] = value
    return pod


def cleanup_orphans(
    api: PodApi,
    *,
    run_id: str | None = None,
    all_runs: bool = False,
    default_ttl_s: float,
    dry_run: bool = False,
    now: datetime | None = None,
) -> list[str]:
    """Delete session pods that nobody renews any more.

    A pod goes when its ``uirl/expires-at`` has passed (pods without the annotation:
    creation + ``default_ttl_s``), when it belongs to ``run_id``, or always with
    ``all_runs``. Pods are found by the label ``app=uirl-session`` only.

    Returns:
        The names of the deleted pods (with ``dry_run``: of those that would go).

    Raises:
        PodApiError: the pods could not be listed.
    """
    now = now or datetime.now(UTC)
    pods, _ = api.list(session_selector())
    doomed = []
    for pod in pods:
        expires = pod.expires_at(default_ttl_s)
        expired = expires is not None and expires <= now
        if all_runs or expired or (run_id is not None and pod.run_id == run_id):
            doomed.append(pod.name)
    if dry_run:
        return doomed
    deleted = []
    for name in doomed:
        try:
            api.delete(name)
        except PodApiError as exc:
            logger.warning("could not delete orphaned pod %s: %s", name, exc)
        else:
            deleted.append(name)
    if deleted:
        logger.info("deleted %d orphaned session pod(s): %s", len(deleted), ", ".join(deleted))
    return deleted
