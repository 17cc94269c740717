"""Sessions away from the trainer: ``env.runtime`` kubernetes, servers and openenv, from the
trainers and evaluate.py, end to end without a cluster.

Kubernetes runs against the stand-in API server (``k8s_standin.py``: its pods are real
session servers), ``servers`` against session servers this module starts by hand (as a
user would), ``openenv`` against a real OpenEnv server in a thread. Bad settings must
fail before any model loads; a session lost on a remote runtime must end its episode as
a session failure (``episode.error``), never as the policy's mistake.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import uuid
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import requests
import yaml

pytest.importorskip("kubernetes")
pytest.importorskip("torch")

import test_kubernetes  # noqa: E402
from k8s_standin import PodStandIn, serve_app  # noqa: E402
from test_kubernetes import NS, free_port, runtime_config, wait_until  # noqa: E402

from uirl_agents.episodes.rollout import EpisodeSpec, collect_episodes  # noqa: E402
from uirl_agents.episodes.trajectories import load_episodes  # noqa: E402
from uirl_agents.policies.base import PolicyStep  # noqa: E402
from uirl_agents.trainers.cli import config_to_dict, load_config  # noqa: E402
from uirl_agents.trainers.config import GRPOConfig, RSConfig  # noqa: E402
from uirl_agents.trainers.metrics import read_metrics  # noqa: E402
from uirl_gym.actions import Action, ActionType  # noqa: E402
from uirl_gym.env import UIEnv  # noqa: E402
from uirl_gym.make import (  # noqa: E402
    RuntimeSettings,
    RuntimeSettingsError,
    build_runtime,
    rank_kubernetes,
    rank_servers,
    vector_env,
)
from uirl_gym.protocol import TOKEN_ENV_VAR
from uirl_gym.runtimes.kubernetes import KubernetesRuntime  # noqa: E402
from uirl_gym.runtimes.kubernetes.api import RUN_LABEL, PodApi  # noqa: E402
from uirl_gym.runtimes.kubernetes.proxy import ProxyConfig, create_proxy_app  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
TINY_CPU = REPO / "scripts" / "configs" / "tiny_cpu.yaml"
RECIPE = REPO / "scripts" / "configs" / "k8s_256_sessions.yaml"
TOKEN = "hand-started-servers-token"
# The stand-in API server and its pod API, as test_kubernetes.py makes them (per module).
standin = test_kubernetes.standin
api = test_kubernetes.api
CLICK = Action(ActionType.LEFT_CLICK, x=640, y=400)


# -- sessions started by hand ----------------------------------------------------------------


@dataclass
class HandServer:
    """A session server started as a user would (``python -m uirl_gym.session``)."""

    url: str
    process: subprocess.Popen[bytes]

    def episodes(self) -> int:
        """Resets this server has served (its task's episode counter)."""
        return int(requests.get(self.url + "/health", timeout=10).json()["episode"])

    def kill(self) -> None:
        """SIGKILL the server and its browser, as a crashed machine would."""
        try:
            os.killpg(self.process.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self.process.wait(timeout=10)


def start_servers(n: int, folder: Path) -> list[HandServer]:
    servers = []
    for _ in range(n):
        port_file = folder / f"{uuid.uuid4().hex}.port"
        command = [sys.executable, "-m", "uirl_gym.session", "--port", "0"]
        command += ["--port-file", str(port_file), "--parent-pid", str(os.getpid())]
        process = subprocess.Popen(
            command,
            env={**os.environ, "PYTHONPATH": str(REPO), TOKEN_ENV_VAR: TOKEN},
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
        servers.append(HandServer("", process))
        wait_until(port_file.exists, 30, "the server's port file")
        servers[-1].url = f"http://127.0.0.1:{port_file.read_text().strip()}"
    for server in servers:
        wait_until(lambda s=server: _ready(s.url), 60, f"{server.url} to be ready")
    return servers


def _ready(url: str) -> bool:
    try:
        return requests.get(url + "/", timeout=2).status_code == 200
    except requests.RequestException:
        return False


def stop_servers(servers: Sequence[HandServer]) -> None:
    for server in servers:
        if server.process.poll() is None:
            server.process.terminate()
    for server in servers:
        try:
            server.process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            server.kill()


@pytest.fixture(scope="module")
def hand_servers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[list[HandServer]]:
    servers = start_servers(2, tmp_path_factory.mktemp("servers"))
    yield servers
    stop_servers(servers)


def closed_url() -> str:
    """A URL nothing listens on."""
    return f"http://127.0.0.1:{free_port()}"


def run_script(
    args: list[str], *, env: dict[str, str] | None = None, timeout_s: float = 420
) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(REPO), "OMP_NUM_THREADS": "1", **(env or {})}
    result = subprocess.run(
        [sys.executable, *args], env=env, capture_output=True, text=True, timeout=timeout_s
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-6000:]
    return result


# -- the settings --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"servers": ["http://a:1"]}, "env.servers is set but env.runtime is 'local'"),
        ({"runtime": "servers"}, "env.servers lists none"),
        ({"runtime": "openenv"}, "env.openenv_url goes with env.runtime: openenv"),
        ({"runtime": "servers", "servers": ["a:1"]}, "expected a URL"),
        ({"runtime": "cluster"}, "env.runtime: expected one of"),
    ],
)
def test_runtime_settings_say_what_to_fix(fields: dict[str, Any], message: str) -> None:
    with pytest.raises(RuntimeSettingsError, match=message):
        RuntimeSettings(**fields)


def test_runtime_settings_from_the_command_line_and_the_recipe() -> None:
    config = load_config(
        GRPOConfig,
        TINY_CPU,
        {
            "env.runtime": "servers",
            "env.servers": "http://10.0.0.5:8001,http://10.0.0.5:8002",
            "env.kubernetes.proxy_token": "s3cret",
        },
    )
    assert config.env.servers == ["http://10.0.0.5:8001", "http://10.0.0.5:8002"]
    # A saved, logged or pushed config never holds a token.
    assert config_to_dict(config)["env"]["kubernetes"]["proxy_token"] is None
    with pytest.raises(ValueError, match="reward_mode dense .* OpenEnv"):
        load_config(
            GRPOConfig, TINY_CPU, {"env.runtime": "openenv", "env.openenv_url": "http://a:1"}
        )
    with pytest.raises(ValueError, match="rs.expert_episodes: the scripted expert"):
        load_config(
            RSConfig,
            TINY_CPU,
            {
                "env.runtime": "openenv",
                "env.openenv_url": "http://a:1",
                "env.reward_mode": "sparse",
            },
        )
    # The recipe: 8 processes x its num_envs = 256 sessions; with runtime local it is a
    # valid local config (what the two-process test below runs at tiny scale).
    recipe = load_config(GRPOConfig, RECIPE)
    assert recipe.env.runtime == "kubernetes" and 8 * recipe.env.num_envs == 256
    assert load_config(GRPOConfig, RECIPE, {"env.runtime": "local"}).env.num_envs == 32
    # docs/training.md shows the file as it is.
    docs = (REPO / "docs" / "training.md").read_text()
    section = docs[docs.index("### Sessions off the training node") :]
    shown = section.split("```yaml\n", 1)[1].split("```", 1)[0]
    assert yaml.safe_load(shown) == yaml.safe_load(RECIPE.read_text())


def test_each_process_gets_sessions_of_its_own() -> None:
    servers = [f"http://h:{8000 + i}" for i in range(7)]
    shares = [rank_servers(servers, rank, 3) for rank in range(3)]
    assert sorted(u for share in shares for u in share) == sorted(servers)  # all used
    assert all(len(share) >= 2 for share in shares)  # spares spread
    settings = RuntimeSettings(runtime="kubernetes", kubernetes={"run_id": "exp42"})
    assert rank_kubernetes(settings.kubernetes, 0, 1).run_id == "exp42"
    ids = {rank_kubernetes(settings.kubernetes, r, 8).run_id for r in range(8)}
    assert ids == {f"exp42-r{r}" for r in range(8)}


# -- bad settings fail before any model loads -----------------------------------------------


@pytest.mark.parametrize(
    "case",
    ["unreachable server", "no token", "too few servers", "no rbac", "no api", "no openenv"],
)
def test_bad_settings_fail_before_the_model_loads(
    case: str,
    standin: PodStandIn,
    hand_servers: list[HandServer],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from uirl_agents.trainers.run import TrainingRun

    k8s = {"env.runtime": "kubernetes", "env.kubernetes.api_server": standin.url}
    overrides, message = {
        "unreachable server": (
            {"env.runtime": "servers", "env.servers": f"{hand_servers[0].url},{closed_url()}"},
            "is not reachable .* Fix: start it",
        ),
        "no token": (
            {"env.runtime": "servers", "env.servers": hand_servers[0].url},
            "needs the session token .* UIRL_SESSION_TOKEN",
        ),
        "too few servers": (
            {"env.runtime": "servers", "env.servers": hand_servers[0].url},
            r"lists 1 session server\(s\); 1 process\(es\) x env.num_envs 2 need 2",
        ),
        "no rbac": (
            {**k8s, "env.kubernetes.namespace": "locked"},
            "may not create, get, list, watch, patch, delete pods in namespace 'locked'.*"
            "rolebinding",
        ),
        "no api": (
            {**k8s, "env.kubernetes.api_server": closed_url()},
            "the Kubernetes API at .* is not reachable",
        ),
        "no openenv": (
            {"env.runtime": "openenv", "env.openenv_url": closed_url()},
            "the OpenEnv server .* is not reachable",
        ),
    }[case]
    if case != "no token":
        monkeypatch.setenv(TOKEN_ENV_VAR, TOKEN)
    else:
        monkeypatch.delenv(TOKEN_ENV_VAR, raising=False)
        overrides["env.num_envs"] = 1
    standin.forbid("locked")
    # A model that does not exist: only a check that runs before loading it passes here.
    overrides["model.name"] = str(tmp_path / "no-such-model")
    overrides["env.reward_mode"] = "sparse"
    config = load_config(GRPOConfig, TINY_CPU, overrides)
    with pytest.raises(RuntimeSettingsError, match=message):
        TrainingRun(config, tmp_path / "run", "grpo")
    assert not (tmp_path / "run" / "config_grpo.yaml").exists()


def test_a_proxy_that_wants_another_token_is_said_at_start(
    standin: PodStandIn, api: PodApi, monkeypatch: pytest.MonkeyPatch
) -> None:
    from uirl_gym.make import check_runtime

    monkeypatch.delenv("UIRL_PROXY_TOKEN", raising=False)
    with serve_app(create_proxy_app(ProxyConfig(token="proxy-secret"), api)) as url:
        k8s = {"api_server": standin.url, "namespace": NS, "proxy_url": url}
        for token, message in ((None, "wants a bearer token"), ("wrong", "refuses this")):
            settings = RuntimeSettings(
                runtime="kubernetes", kubernetes={**k8s, "proxy_token": token}
            )
            with pytest.raises(RuntimeSettingsError, match=message):
                check_runtime(settings, num_envs=1)
        right = {**k8s, "proxy_token": "proxy-secret"}
        check_runtime(RuntimeSettings(runtime="kubernetes", kubernetes=right), num_envs=1)
    wrong_namespace = {**k8s, "namespace": "elsewhere"}
    with serve_app(create_proxy_app(ProxyConfig(), api)) as url:
        wrong_namespace["proxy_url"] = url
        with pytest.raises(RuntimeSettingsError, match="serves namespace 'uirl-test'"):
            check_runtime(
                RuntimeSettings(runtime="kubernetes", kubernetes=wrong_namespace), num_envs=1
            )


def test_evaluate_refuses_too_few_servers(
    hand_servers: list[HandServer], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    sys.path.insert(0, str(REPO / "scripts"))
    from evaluate import main as evaluate_main

    with pytest.raises(SystemExit):
        evaluate_main(
            ["--agent", "hf:tiny", "--num-envs", "2", "--out", str(tmp_path)]
            + ["--env.runtime", "servers", "--env.servers", hand_servers[0].url]
        )
    assert "env.num_envs 2 need 2" in capsys.readouterr().err
    assert not list(tmp_path.iterdir())  # no model built, nothing written


# -- servers started by hand --------------------------------------------------------------------


@pytest.mark.slow
def test_grpo_and_evaluate_on_servers_started_by_hand(
    hand_servers: list[HandServer], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The issue's command: trains on the servers and starts no session of its own."""
    before = [s.episodes() for s in hand_servers]
    urls = ",".join(s.url for s in hand_servers)
    out = tmp_path / "grpo"
    run_script(
        [str(REPO / "scripts" / "train_grpo.py"), "--config", str(TINY_CPU)]
        + ["--output-dir", str(out), "--iterations", "1", "--logging.progress", "false"]
        + ["--env.runtime", "servers", "--env.servers", urls],
        env={TOKEN_ENV_VAR: TOKEN},
    )
    records = [r for r in read_metrics(out) if "rollout/episodes" in r]
    assert records[0]["rollout/episodes"] == 4 and "eval/reward_mean" in records[0]
    served = [s.episodes() - b for s, b in zip(hand_servers, before, strict=True)]
    # Every episode (4 training + 2 evaluation) reset one of these servers: none ran on
    # a session of the trainer's own, and both servers were used.
    assert sum(served) == 6 and min(served) >= 1, served

    monkeypatch.setenv(TOKEN_ENV_VAR, TOKEN)
    sys.path.insert(0, str(REPO / "scripts"))
    from evaluate import main as evaluate_main

    before = [s.episodes() for s in hand_servers]
    code = evaluate_main(
        ["--agent", "expert", "--episodes", "2", "--num-envs", "2", "--rows", "1"]
        + ["--out", str(tmp_path / "eval"), "--env.runtime", "servers", "--env.servers", urls]
    )
    assert code == 0
    results = json.loads((tmp_path / "eval" / "results.json").read_text())
    (result,) = results["agents"]
    assert result["episodes"] == 2 and result["success_rate"] == 1 and not result["session_errors"]
    assert [s.episodes() - b for s, b in zip(hand_servers, before, strict=True)] == [1, 1]


def test_trl_environments_share_a_runtime_built_from_the_setting(
    hand_servers: list[HandServer], monkeypatch: pytest.MonkeyPatch
) -> None:
    """TRL's environment class builds its runtime with the same builder: each instance
    of a process gets a server of its own."""
    pytest.importorskip("trl")
    from uirl_agents.integrations.trl import make_environment

    monkeypatch.setenv(TOKEN_ENV_VAR, TOKEN)
    # As scripts/train_trl.py passes it from its YAML config.
    settings = {"runtime": "servers", "servers": [s.url for s in hand_servers]}
    environment = make_environment("uirl/SimpleDataEntry-v0", runtime=settings, max_steps=2)
    first, second = environment(), environment()
    try:
        for env in (first, second):
            assert env.reset(seed=3)[0]["type"] == "image"
            assert env.click(x=100, y=100)[1]["text"].startswith("Clicked")
        urls = {env._holder["backend"].env.session.base_url for env in (first, second)}
        assert urls == {s.url for s in hand_servers}
    finally:
        first._close()
        second._close()


class _ClickThenKill:
    """Clicks; before its ``kill_at``-th call it kills a server (a machine lost)."""

    name = "click"

    def __init__(self, victim: HandServer, kill_at: int) -> None:
        self.victim, self.kill_at, self.calls = victim, kill_at, 0

    def begin_episode(self, env_index: int) -> None:
        pass

    def act(self, observations: Sequence[dict[str, Any]], env_indices: Sequence[int]) -> list:
        self.calls += 1
        if self.calls == self.kill_at:
            self.victim.kill()
        return [PolicyStep(action=CLICK) for _ in env_indices]


def test_a_lost_server_is_a_session_failure_and_a_spare_takes_over(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(TOKEN_ENV_VAR, TOKEN)
    victim, spare = start_servers(2, tmp_path)
    try:
        settings = RuntimeSettings(runtime="servers", servers=[victim.url, spare.url])
        runtime = build_runtime(settings)
        envs = vector_env(settings, 1, runtime=runtime)
        try:
            policy = _ClickThenKill(victim, kill_at=2)
            specs = [EpisodeSpec(seed=s, options={"num_rows": 1}) for s in (0, 1)]
            lost, after = collect_episodes(policy, envs, specs, max_steps=3, progress=False)
        finally:
            envs.close()
            runtime.close()
        # The lost server's episode ended at that step as a session failure: no penalty,
        # no invalid action charged to the policy.
        assert lost.error is not None and "SessionUnavailableError" in lost.error
        assert lost.length == 2 and lost.steps[-1].truncated
        assert lost.steps[-1].reward == 0 and lost.steps[-1].error is None
        # The next episode ran whole on the spare.
        assert after.error is None and after.length == 3
        assert spare.episodes() >= 1
    finally:
        stop_servers([victim, spare])


# -- Kubernetes, against the stand-in ---------------------------------------------------------


def test_evicted_pod_and_restarted_proxy_are_session_failures(
    standin: PodStandIn, api: PodApi
) -> None:
    """A pod deleted under a running episode (eviction) and the proxy going away each
    end that episode truncated with ``info["error"]``, charged nothing; the next reset
    runs on a replacement pod. (Before: the proxy's 404 for the evicted pod's session was
    read as a refused action, the invalid-action penalty, and the episode went on.)"""
    port = free_port()
    runtime = None
    try:
        with serve_app(create_proxy_app(ProxyConfig(), api), port) as url:
            runtime = KubernetesRuntime(runtime_config(standin, pool_size=1, proxy_url=url))
            env = UIEnv(runtime=runtime, image_format="jpeg")
            env.reset(seed=0)
            first = env.session
            assert first is not None and env.step(CLICK)[3] is False
            pod = f"uirl-session-{first.session_id}"
            process = standin.kubelet_process(NS, pod)
            assert process is not None
            api.delete(pod)  # evicted
            wait_until(lambda: process.poll() is not None, 15, "the evicted pod to stop")
            _, reward, terminated, truncated, info = env.step(CLICK)
            assert truncated and not terminated and reward == 0
            assert "error" in info and "invalid_action" not in info, info
            env.reset(seed=1)  # a replacement
            assert env.session is not None and env.session.session_id != first.session_id
            assert env.step(CLICK)[3] is False
        # The proxy is down (restarting): the step in flight fails as the session's.
        _, reward, terminated, truncated, info = env.step(CLICK)
        assert truncated and reward == 0 and "error" in info and "invalid_action" not in info
        with serve_app(create_proxy_app(ProxyConfig(), api), port):
            env.reset(seed=2)  # once it is back, the run goes on
            assert env.step(CLICK)[3] is False
            env.close()
    finally:
        if runtime is not None:
            runtime.close()
    wait_until(lambda: not standin.pods(NS), 15, "every pod to be deleted")


def test_evaluate_on_kubernetes_through_the_proxy(
    standin: PodStandIn, api: PodApi, tmp_path: Path
) -> None:
    sys.path.insert(0, str(REPO / "scripts"))
    from evaluate import main as evaluate_main

    created = len(standin.created)
    common = ["--agent", "expert", "--episodes", "2", "--num-envs", "2", "--rows", "1"]
    with serve_app(create_proxy_app(ProxyConfig(), api)) as url:
        code = evaluate_main(
            [*common, "--out", str(tmp_path / "k8s"), "--env.runtime", "kubernetes"]
            + ["--env.kubernetes.api_server", standin.url, "--env.kubernetes.namespace", NS]
            + ["--env.kubernetes.container_port", str(free_port())]
            + ["--env.kubernetes.proxy_url", url, "--env.kubernetes.pool_size", "0"]
        )
    assert code == 0
    results = json.loads((tmp_path / "k8s" / "results.json").read_text())
    (result,) = results["agents"]
    assert result["episodes"] == 2 and result["success_rate"] == 1 and not result["session_errors"]
    pods = standin.created[created:]
    assert len(pods) == 2 and len({name for _, name, _ in pods}) == 2  # one per sub-env
    wait_until(lambda: not standin.pods(NS), 15, "every pod to be deleted")
    # The runtime is invisible to the agent: the same episodes as on local sessions.
    assert evaluate_main([*common, "--out", str(tmp_path / "local")]) == 0
    played = {
        where: [
            (e.seed, [(s.action, s.reward) for s in e.steps])
            for e in load_episodes(tmp_path / where / "expert")
        ]
        for where in ("k8s", "local")
    }
    assert played["k8s"] == played["local"]


# The recipe (k8s_256_sessions.yaml) at tiny scale: the same file, smaller numbers.
TINY_SCALE = [
    "--model.name", "tiny", "--model.dtype", "auto", "--model.lora_rank", "8",
    "--model.lora_alpha", "16", "--model.gradient_checkpointing", "false",
    "--model.attn_implementation", "null",
    "--env.num_envs", "1", "--env.max_steps", "2",
    "--rollout.episodes_per_iteration", "4", "--rollout.group_size", "2",
    "--rollout.max_new_tokens", "16", "--rollout.max_images", "1",
    "--optim.grad_accumulation_steps", "1", "--optim.micro_batch_tokens", "4096",
    "--eval.episodes", "2", "--eval.at_start", "false", "--iterations", "1",
    "--logging.progress", "false",
]  # fmt: skip


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_grpo_two_processes_on_kubernetes(standin: PodStandIn, tmp_path: Path) -> None:
    """Two processes, the recipe's Kubernetes runtime: same weights, disjoint pods."""
    out = tmp_path / "run"
    run_id = f"t{uuid.uuid4().hex[:8]}"
    created = len(standin.created)
    run_script(
        ["-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2"]
        + [str(REPO / "scripts" / "check_ranks.py"), "--trainer", "grpo"]
        + ["--config", str(RECIPE), "--output-dir", str(out), *TINY_SCALE]
        + ["--env.kubernetes.api_server", standin.url, "--env.kubernetes.namespace", NS]
        + ["--env.kubernetes.container_port", str(free_port())]
        + ["--env.kubernetes.pool_size", "0", "--env.kubernetes.run_id", run_id]
    )
    report = json.loads((out / "rank_check.json").read_text())
    assert report["processes"] == 2
    assert report["max_abs_difference_at_start"] == 0 == report["max_abs_difference_at_end"]
    # Each process leased pods of its own run id, one per sub-env, none lost or shared.
    pods = standin.created[created:]
    by_rank = {
        r: {n for _, n, labels in pods if labels[RUN_LABEL] == f"{run_id}-r{r}"} for r in (0, 1)
    }
    assert len(pods) == 2 and all(len(names) == 1 for names in by_rank.values()), pods
    for rank in (0, 1):  # each process played its own share of the episodes on them
        episodes = load_episodes(out / "trajectories" / "iter_000000" / f"rank_{rank}")
        assert len(episodes) == 2 and all(e.error is None for e in episodes)
    wait_until(lambda: not standin.pods(NS), 15, "every pod to be deleted")


# -- OpenEnv -------------------------------------------------------------------------------------


@pytest.mark.slow
def test_grpo_on_an_openenv_server(tmp_path: Path) -> None:
    pytest.importorskip("openenv")
    from uirl_gym.openenv import make_app

    out = tmp_path / "grpo"
    with serve_app(make_app()) as url:
        run_script(
            [str(REPO / "scripts" / "train_grpo.py"), "--config", str(TINY_CPU)]
            + ["--output-dir", str(out), "--iterations", "1", "--logging.progress", "false"]
            + ["--env.runtime", "openenv", "--env.openenv_url", url]
            + ["--env.reward_mode", "sparse", "--eval.episodes", "0"]
        )
    episodes = load_episodes(out / "trajectories" / "iter_000000" / "rank_0")
    assert len(episodes) == 4 and all(e.error is None for e in episodes)
    assert {e.task for e in episodes} == {"simple_data_entry"}
    assert all(e.length == 2 for e in episodes)  # tiny_cpu's max_steps, not the server's 60
    assert [r for r in read_metrics(out) if "train/optimizer_steps" in r]


def test_openenv_lost_connection_ends_the_episode_as_a_session_failure() -> None:
    pytest.importorskip("openenv")
    from uirl_gym.openenv import make_app
    from uirl_gym.remote_env import OpenEnvEnv

    port = free_port()
    with serve_app(make_app(), port) as url:
        env = OpenEnvEnv(url)
        obs, info = env.reset(seed=0, options={"num_rows": 1})
        assert obs["screenshot"].shape == (800, 1280, 3) and info["task"] == "simple_data_entry"
        assert env.step(CLICK)[3] is False
        with pytest.raises(NotImplementedError, match="keeps the task's oracle to itself"):
            env.oracle()
    _, reward, terminated, truncated, info = env.step(CLICK)  # the server went away
    assert truncated and reward == 0 and "error" in info
    with serve_app(make_app(), port):
        assert env.reset(seed=0, options={"num_rows": 1})[0]["screenshot"].shape[0] == 800
        env.close()


def test_a_short_step_deadline_still_waits_for_the_servers_answer() -> None:
    """The first reset starts a session on the server (about a second): a client with a
    0.5 s step deadline took that for a lost connection (issue 42 review)."""
    pytest.importorskip("openenv")
    from uirl_gym.openenv import make_app
    from uirl_gym.remote_env import OpenEnvEnv

    with serve_app(make_app()) as url:
        env = OpenEnvEnv(url, step_timeout_s=0.5)
        try:
            obs, info = env.reset(seed=0, options={"num_rows": 1})
            assert obs["screenshot"].shape == (800, 1280, 3) and "error" not in info
            _, _, _, truncated, info = env.step(CLICK)
            assert not truncated and "error" not in info
        finally:
            env.close()


def test_a_full_openenv_server_says_how_many_sessions_it_needs() -> None:
    pytest.importorskip("openenv")
    from uirl_gym.openenv import OpenEnvServerConfig, make_app
    from uirl_gym.remote_env import OpenEnvEnv

    with serve_app(make_app(OpenEnvServerConfig(max_sessions=1))) as url:
        holder, refused = OpenEnvEnv(url), OpenEnvEnv(url)
        try:
            with pytest.raises(RuntimeError, match="--max-sessions of at least env.num_envs"):
                refused.reset(seed=0)
        finally:
            refused.close()
            holder.close()
