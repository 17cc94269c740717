"""The one place that checks where sessions run and builds runtimes and envs on them.

The trainers' ``env`` section, ``scripts/evaluate.py``'s ``--env.*`` options and the TRL
environment class all hold a :class:`RuntimeSettings`:

- ``local`` (default): session servers as subprocesses of this process;
- ``kubernetes``: session pods with a warm pool (``kubernetes``: the
  :class:`~uirl_gym.runtimes.kubernetes.config.KubernetesRuntimeConfig` fields);
- ``servers``: session servers that already run (``servers``: their URLs);
- ``openenv``: WebSocket sessions on an OpenEnv server (``openenv_url``).

:func:`check_runtime` makes every check that needs no session (reachable URLs, RBAC,
enough servers) so that a run fails before it loads a model; :func:`build_runtime` and
:func:`vector_env` then make this process's share. Each process of a multi-process run
gets sessions of its own: a stride of ``servers`` (:func:`rank_servers`), pods under a
run id of its own (``-r{rank}``), its own WebSocket sessions. :func:`make_env` makes one
env on them (the TRL integration's instances), :func:`shared_runtime` one runtime a
process's instances share. The trainers, ``scripts/evaluate.py``, the TRL integration
and the OpenEnv server (``--runtime kubernetes``) all build here.

Example::

    settings = RuntimeSettings(runtime="servers", servers=["http://a:8001", "http://a:8002"])
    check_runtime(settings, num_envs=2)
    runtime = build_runtime(settings)
    envs = vector_env(settings, 2, runtime=runtime)
"""

from __future__ import annotations

import dataclasses
import json
import threading
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, get_args

import requests

from uirl_gym.actions import DEFAULT_SCREEN
from uirl_gym.protocol import ProxyRoute, proxied_url
from uirl_gym.runtimes.base import Runtime
from uirl_gym.runtimes.kubernetes.config import LABEL_VALUE_RE, KubernetesRuntimeConfig

if TYPE_CHECKING:
    from uirl_gym.env import UIEnv
    from uirl_gym.remote_env import OpenEnvEnv
    from uirl_gym.vector import SessionVectorEnv

RuntimeKind = Literal["local", "kubernetes", "servers", "openenv"]
RUNTIME_KINDS: tuple[str, ...] = get_args(RuntimeKind)
CHECK_TIMEOUT_S = 5.0
# What the trainer's service account or user needs on pods (uirl_gym/deploy/rbac.yaml).
POD_VERBS = ("create", "get", "list", "watch", "patch", "delete")


DENSE_ON_OPENENV = (
    "env.reward_mode dense shapes the reward from the task's oracle, which an OpenEnv server "
    "keeps to itself: set env.reward_mode: sparse (the reward is the server's own: start it "
    "with --reward-mode dense for shaping)"
)


class RuntimeSettingsError(ValueError):
    """A runtime setting that cannot work here; the message says what to fix."""


@dataclass
class RuntimeSettings:
    """Where sessions run (help text: each field's ``metadata["help"]``)."""

    runtime: RuntimeKind = field(
        default="local",
        metadata={
            "help": "Where sessions run: local (subprocesses here), kubernetes (pods, "
            "env.kubernetes), servers (running session servers, env.servers) or openenv "
            "(an OpenEnv server, env.openenv_url); docs/kubernetes.md."
        },
    )
    servers: list[str] = field(
        default_factory=list,
        metadata={
            "help": "runtime servers: session-server URLs (a YAML list, or comma-separated "
            "on the command line), at least num_envs per process; process r takes every "
            "world_size-th from the r-th. Their token: $UIRL_SESSION_TOKEN."
        },
    )
    openenv_url: str | None = field(
        default=None,
        metadata={
            "help": "runtime openenv: the OpenEnv server (python -m uirl_gym.openenv), "
            "with --max-sessions >= num_envs x processes."
        },
    )
    kubernetes: KubernetesRuntimeConfig = field(
        default_factory=KubernetesRuntimeConfig,
        metadata={"help": "runtime kubernetes: the pods (one runtime per process)."},
    )

    def __post_init__(self) -> None:
        if self.runtime not in RUNTIME_KINDS:
            raise RuntimeSettingsError(
                f"env.runtime: expected one of {list(RUNTIME_KINDS)}, got {self.runtime!r}"
            )
        if isinstance(self.kubernetes, dict):  # RuntimeSettings(**a_yaml_mapping)
            self.kubernetes = KubernetesRuntimeConfig(**self.kubernetes)
        if self.servers and self.runtime != "servers":
            raise RuntimeSettingsError(
                f"env.servers is set but env.runtime is {self.runtime!r}: set env.runtime: "
                "servers to use them (or leave env.servers empty)"
            )
        if self.runtime == "servers" and not self.servers:
            raise RuntimeSettingsError(
                "env.runtime is servers but env.servers lists none: give their URLs "
                "(--env.servers http://host:8001,http://host:8002)"
            )
        if (self.openenv_url is not None) != (self.runtime == "openenv"):
            raise RuntimeSettingsError(
                "env.openenv_url goes with env.runtime: openenv (and openenv needs it); got "
                f"env.runtime {self.runtime!r}, env.openenv_url {self.openenv_url!r}"
            )
        for url in [*self.servers, *([self.openenv_url] if self.openenv_url else [])]:
            if not url.startswith(("http://", "https://")):
                raise RuntimeSettingsError(f"{url!r}: expected a URL http(s)://host:port")

    @property
    def has_oracle(self) -> bool:
        """The task's privileged state (dense shaping, the scripted expert) is reachable:
        everywhere but through OpenEnv, which keeps it in its server."""
        return self.runtime != "openenv"


def describe(settings: RuntimeSettings, rank: int = 0, world_size: int = 1) -> str:
    """Where process ``rank``'s sessions run, for the log."""
    if settings.runtime == "servers":
        return f"servers {', '.join(rank_servers(settings.servers, rank, world_size))}"
    if settings.runtime == "openenv":
        return f"the OpenEnv server {settings.openenv_url}"
    if settings.runtime == "kubernetes":
        k8s = rank_kubernetes(settings.kubernetes, rank, world_size)
        route = k8s.proxy_url or "pod IPs"
        return f"Kubernetes pods in namespace {k8s.namespace} (run id {k8s.run_id}, via {route})"
    return "local session servers"


def rank_servers(servers: list[str], rank: int, world_size: int) -> list[str]:
    """Process ``rank``'s share of ``servers``: every ``world_size``-th from the
    ``rank``-th, so that no two processes share a server and spares spread evenly."""
    return servers[rank::world_size]


def rank_kubernetes(
    config: KubernetesRuntimeConfig, rank: int, world_size: int
) -> KubernetesRuntimeConfig:
    """Process ``rank``'s Kubernetes settings: its own run id (``{run_id}-r{rank}``) with
    several processes, so that no process's start-up clean-up deletes another's pods."""
    if world_size == 1:
        return config
    run_id = f"{config.run_id}-r{rank}"
    if not LABEL_VALUE_RE.match(run_id):
        raise RuntimeSettingsError(
            f"env.kubernetes.run_id: {config.run_id!r} + '-r{rank}' is not a label value (at "
            "most 63 characters): choose a shorter run id"
        )
    return dataclasses.replace(config, run_id=run_id)


def check_runtime(
    settings: RuntimeSettings, *, num_envs: int, rank: int = 0, world_size: int = 1
) -> None:
    """Every check of ``settings`` that needs no session, for process ``rank``.

    Raises:
        RuntimeSettingsError: too few servers for ``num_envs`` x ``world_size``, an
            unreachable URL, a server whose token is not ``$UIRL_SESSION_TOKEN``, no
            Kubernetes configuration or API, missing RBAC permissions on pods, a proxy
            that does not answer or serves another namespace; the message says what to fix.
    """
    try:
        if settings.runtime == "servers":
            _check_servers(settings.servers, num_envs, rank, world_size)
        elif settings.runtime == "openenv":
            assert settings.openenv_url is not None
            _check_openenv(settings.openenv_url)
        elif settings.runtime == "kubernetes":
            _check_kubernetes(rank_kubernetes(settings.kubernetes, rank, world_size))
    except RuntimeSettingsError:
        raise
    except ValueError as exc:
        raise RuntimeSettingsError(str(exc)) from None


def _check_servers(servers: list[str], num_envs: int, rank: int, world_size: int) -> None:
    from uirl_gym.runtimes.servers import check_servers

    needed = num_envs * world_size
    if len(servers) < needed:
        raise RuntimeSettingsError(
            f"env.servers lists {len(servers)} session server(s); {world_size} process(es) x "
            f"env.num_envs {num_envs} need {needed} (each sub-env a server of its own): list "
            f"{needed - len(servers)} more, or lower env.num_envs"
        )
    duplicates = sorted({u for u in servers if servers.count(u) > 1})
    if duplicates:
        raise RuntimeSettingsError(
            f"env.servers lists {duplicates} more than once: a server serves one sub-env"
        )
    check_servers(rank_servers(servers, rank, world_size))


def _check_openenv(url: str) -> None:
    try:
        reply = requests.get(url.rstrip("/") + "/health", timeout=CHECK_TIMEOUT_S)
    except requests.RequestException as exc:
        raise RuntimeSettingsError(
            f"the OpenEnv server {url} is not reachable ({type(exc).__name__}: {exc}). Fix: "
            "start it (python -m uirl_gym.openenv --host 0.0.0.0 --port 8000 --max-sessions N) "
            "or correct env.openenv_url"
        ) from None
    if reply.status_code != 200:
        raise RuntimeSettingsError(
            f"the OpenEnv server {url} answers /health with HTTP {reply.status_code}: is it "
            "python -m uirl_gym.openenv?"
        )


def _check_kubernetes(config: KubernetesRuntimeConfig) -> None:
    try:
        from uirl_gym.runtimes.kubernetes.api import (
            KubernetesConfigError,
            PodApi,
            PodApiError,
            load_api_client,
        )
    except ImportError as exc:
        raise RuntimeSettingsError(str(exc)) from None
    try:
        client = load_api_client(
            api_server=config.api_server,
            kubeconfig=config.kubeconfig,
            context=config.context,
            in_cluster=config.in_cluster,
        )
    except KubernetesConfigError as exc:
        raise RuntimeSettingsError(str(exc)) from None
    ns = config.namespace
    try:
        api = PodApi(client, ns)
        try:
            missing = [verb for verb in POD_VERBS if not api.can_i(verb)]
        except PodApiError as exc:
            host = client.configuration.host
            if exc.status == 0:
                raise RuntimeSettingsError(
                    f"the Kubernetes API at {host} is not reachable ({exc.reason}). Fix: check "
                    "env.kubernetes.api_server / kubeconfig / context (kubectl cluster-info)"
                ) from None
            raise RuntimeSettingsError(
                f"the Kubernetes API at {host} refused an access review: {exc}"
            ) from None
    finally:
        client.close()
    if missing:
        raise RuntimeSettingsError(
            f"this user may not {', '.join(missing)} pods in namespace {ns!r} (RBAC). Fix: "
            f"apply uirl_gym/deploy/rbac.yaml there and bind its Role uirl-trainer to you: "
            f"kubectl -n {ns} create rolebinding uirl-trainer-me --role uirl-trainer "
            f"--user $(kubectl auth whoami -o jsonpath='{{.status.userInfo.username}}') "
            "(or --serviceaccount NS:NAME for a trainer pod); check with "
            f"kubectl auth can-i create pods -n {ns}"
        )
    if config.proxy_url:
        _check_proxy(config.proxy_url, ns, config.bearer_token())


def _check_proxy(url: str, namespace: str, token: str | None) -> None:
    try:
        reply = requests.get(url.rstrip("/") + ProxyRoute.HEALTH, timeout=CHECK_TIMEOUT_S)
        served = reply.json().get("namespace") if reply.status_code == 200 else None
    except (requests.RequestException, ValueError) as exc:
        raise RuntimeSettingsError(
            f"the routing proxy {url} does not answer /healthz ({type(exc).__name__}: {exc}). "
            "Fix: keep `kubectl -n NS port-forward service/uirl-proxy 8080:8080` running, or "
            "correct env.kubernetes.proxy_url (null inside the cluster: pod IPs)"
        ) from None
    if served != namespace:
        raise RuntimeSettingsError(
            f"the routing proxy {url} serves namespace {served!r}, the sessions live in "
            f"{namespace!r}: port-forward the proxy of that namespace, or set "
            "env.kubernetes.namespace to the proxy's"
        )
    # A made-up session: the proxy answers 404 from its cache, or 401/403 for the token.
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    probe = proxied_url(url, "uirl-token-check") + "/"
    status = requests.get(probe, headers=headers, timeout=CHECK_TIMEOUT_S).status_code
    if status in (401, 403):
        raise RuntimeSettingsError(
            f"the routing proxy {url} {'wants a' if status == 401 else 'refuses this'} bearer "
            f"token (HTTP {status}): set $UIRL_PROXY_TOKEN to the Secret's value (kubectl -n "
            f"{namespace} get secret uirl-proxy-token -o jsonpath='{{.data.token}}' | base64 -d)"
        )


def build_runtime(
    settings: RuntimeSettings,
    *,
    rank: int = 0,
    world_size: int = 1,
    task: str = "simple_data_entry",
) -> Runtime | None:
    """This process's runtime (None for ``openenv``, whose sessions are WebSockets).

    Raises:
        RuntimeSettingsError: from the Kubernetes runtime's start-up (no API, RBAC).
    """
    if settings.runtime == "local":
        from uirl_gym.runtimes.local import LocalRuntime, LocalRuntimeConfig

        return LocalRuntime(LocalRuntimeConfig(task=task))
    if settings.runtime == "servers":
        from uirl_gym.runtimes.servers import ServersRuntime

        return ServersRuntime(rank_servers(settings.servers, rank, world_size))
    if settings.runtime == "kubernetes":
        from uirl_gym.runtimes.kubernetes import KubernetesRuntime

        return KubernetesRuntime(rank_kubernetes(settings.kubernetes, rank, world_size))
    return None


def make_env(
    settings: RuntimeSettings, *, runtime: Runtime | None = None, **env_kwargs: Any
) -> UIEnv | OpenEnvEnv:
    """One env on ``settings``: a :class:`~uirl_gym.env.UIEnv` on ``runtime`` (from
    :func:`build_runtime` or :func:`shared_runtime`; None with ``base_url=``: a server
    started by hand, else a local runtime of the env's own), or an
    :class:`~uirl_gym.remote_env.OpenEnvEnv` on ``settings.openenv_url``.

    ``env_kwargs`` go to the env (``observations``: the page as text besides the
    screenshot, docs/env.md); through OpenEnv only ``task``, ``split`` and
    ``step_timeout_s`` apply (screenshots travel as the server sends them;
    ``reward_mode`` must be the server's, ``sparse`` unless it runs dense; no text
    observations).

    Raises:
        RuntimeSettingsError: an env setting OpenEnv cannot serve.
    """
    from uirl_gym.env import UIEnv

    if settings.runtime != "openenv":
        return UIEnv(runtime=runtime, **env_kwargs)
    from uirl_gym.remote_env import OpenEnvEnv

    url = settings.openenv_url
    assert url is not None  # RuntimeSettings checks it
    return OpenEnvEnv(url, **_openenv_kwargs(env_kwargs))


def _openenv_kwargs(env_kwargs: dict[str, Any]) -> dict[str, Any]:
    kwargs = dict(env_kwargs)
    if kwargs.pop("reward_mode", "sparse") != "sparse":
        raise RuntimeSettingsError(DENSE_ON_OPENENV)
    kwargs.pop("image_format", None)  # OpenEnv sends PNG
    if kwargs.pop("observations", ()):
        raise RuntimeSettingsError(
            "observations: an OpenEnv server sends the screenshot and the instruction only; "
            "ask for the page as text on another env.runtime (local, servers, kubernetes)"
        )
    screen = kwargs.pop("screen_size", None)
    if screen is not None and tuple(screen) != DEFAULT_SCREEN:
        raise RuntimeSettingsError(
            f"env.screen_size {list(screen)}: an OpenEnv server serves its own screen "
            f"({DEFAULT_SCREEN[0]}x{DEFAULT_SCREEN[1]}); leave screen_size unset on openenv"
        )
    return kwargs


def vector_env(
    settings: RuntimeSettings,
    num_envs: int,
    *,
    runtime: Runtime | None,
    **env_kwargs: Any,
) -> SessionVectorEnv:
    """``num_envs`` sub-envs on ``runtime`` (from :func:`build_runtime`; the caller closes
    it after the vector env), or on the OpenEnv server (:func:`make_env`'s rules).
    """
    from uirl_gym.vector import SessionVectorEnv

    if settings.runtime != "openenv":
        return SessionVectorEnv(num_envs, runtime=runtime, **env_kwargs)
    _openenv_kwargs(env_kwargs)  # refuse a bad setting once, before any sub-env starts
    return SessionVectorEnv(
        num_envs, make_env=lambda: make_env(settings, runtime=None, **env_kwargs)
    )


# The runtimes of shared_runtime, one per distinct settings value (and process share):
# TRL makes environment instances with no arguments, and they share one runtime.
_SHARED: dict[str, Runtime] = {}
_SHARED_LOCK = threading.Lock()


def shared_runtime(settings: RuntimeSettings, *, rank: int = 0, world_size: int = 1) -> Runtime:
    """This process's one runtime for ``settings`` (``kubernetes`` or ``servers``), built
    on first use and kept for the process's life (closed at exit, as every runtime).

    Keyed by the settings' value, not the object: two equal settings share a runtime,
    and a new settings object never inherits a dead one's.
    """
    if settings.runtime in ("local", "openenv"):
        raise RuntimeSettingsError(
            f"shared_runtime: env.runtime {settings.runtime!r} has no runtime to share "
            "(local sessions belong to their env; OpenEnv sessions are WebSockets)"
        )
    key = json.dumps([dataclasses.asdict(settings), rank, world_size], sort_keys=True, default=str)
    with _SHARED_LOCK:
        if key not in _SHARED:
            runtime = build_runtime(settings, rank=rank, world_size=world_size)
            assert runtime is not None  # not openenv: refused above
            _SHARED[key] = runtime
        return _SHARED[key]
