"""What of the operator's an agent may be given: only the variables the operator names, never a model API key
(whatever its variable is called), a copy of one, the hidden-item secret or a harness setting; and the agent's
final environment, whatever put a variable there."""

from __future__ import annotations

import warnings
from pathlib import Path

import pytest

from autorl.agent import AgentContext
from autorl.builtin.arith import Arith
from autorl.errors import UsageError
from autorl.gateway.agent_env import operator_variables, scrub
from autorl.plugins.agent_folder import CommandAgent
from autorl.sandbox.agent import agent_environment
from autorl.sweep.keys import Resolver
from autorl.sweep.spec import expand_options

KEY = "sk-free-form-77aa-upstream-key"
SECRET = "c3" * 32


@pytest.fixture
def environ(tmp_path: Path) -> dict[str, str]:
    upstreams = tmp_path / "upstreams.yaml"
    upstreams.write_text("anthropic: {base_url: 'http://127.0.0.1:9', api_key_env: MY_KEY}\n")
    return {
        "AUTORL_LLM_UPSTREAMS": str(upstreams),
        "MY_KEY": KEY,
        "COPY": KEY,
        "SETTING": "model-x",
        "AUTORL_HIDDEN_SECRET": SECRET,
        "SECRET_COPY": SECRET.upper(),
        "OPENAI_API_KEY": "sk-openai-0123456789",
        "PATH": "/usr/bin:/bin",
    }


def test_the_operator_passes_a_setting_by_name(environ: dict[str, str]) -> None:
    got = operator_variables(["SETTING"], {"AUTORL_LLM_MAX_STEPS": "5", "CLAUDE_MODEL": "m"}, environ)
    assert got == {"SETTING": "model-x", "AUTORL_LLM_MAX_STEPS": "5", "CLAUDE_MODEL": "m"}


@pytest.mark.parametrize(
    ("names", "agent_env", "why"),
    [
        (["MY_KEY"], {}, "MY_KEY holds a model API key"),  # the upstreams file's api_key_env
        (["COPY"], {}, "its value holds an upstream key"),  # the key under another name
        (["OPENAI_API_KEY"], {}, "holds a model API key"),
        (["AUTORL_HIDDEN_SECRET"], {}, "AUTORL_* variables are the harness's own"),
        (["AUTORL_LLM_UPSTREAMS"], {}, "AUTORL_* variables are the harness's own"),
        (["SECRET_COPY"], {}, "hidden-item secret"),  # hex in another case
        (["UNSET"], {}, "UNSET is not set"),
        (["bad-name"], {}, "not an environment variable name"),
        ([], {"AUTORL_HOME": "/x"}, "--agent-env AUTORL_HOME: AUTORL_HOME is the harness's own setting"),
        ([], {"X": f"Bearer {KEY}"}, "--agent-env X: its value holds an upstream key"),
        ([], {"GEMINI_API_KEY": "anything"}, "holds a model API key"),
    ],
)
def test_what_the_operator_cannot_pass(
    environ: dict[str, str], names: list[str], agent_env: dict[str, str], why: str
) -> None:
    with pytest.raises(UsageError, match=r"^--agent-") as info:
        operator_variables(names, agent_env, environ)
    assert why in str(info.value) and KEY not in str(info.value) and SECRET not in str(info.value).lower()


def test_the_final_environment_drops_keys_secrets_and_harness_settings(environ: dict[str, str]) -> None:
    # what an agent plugin's environment() might return
    env = {
        "NORMAL": "1",
        "MY_TOKEN": KEY,
        "CONFIG": f'{{"apiKey": "{KEY}"}}',
        "SEED_HEX": SECRET,
        "AUTORL_HOME": "/home/x",
        "AUTORL_HIDDEN_SECRET": SECRET,
        "AUTORL_LLM_MAX_STEPS": "3",
        "AUTORL_TOKEN": "grader-token",
        "ANTHROPIC_AUTH_TOKEN": "sk-ant-oauth-123456",
        "SHORT": "sk",
    }
    out = scrub(env, "http://127.0.0.1:5", "run-token", environ)
    assert {k: out[k] for k in ("NORMAL", "AUTORL_LLM_MAX_STEPS", "AUTORL_TOKEN", "SHORT")} == {
        "NORMAL": "1",
        "AUTORL_LLM_MAX_STEPS": "3",
        "AUTORL_TOKEN": "grader-token",
        "SHORT": "sk",
    }
    assert not {"MY_TOKEN", "CONFIG", "SEED_HEX", "AUTORL_HOME", "AUTORL_HIDDEN_SECRET", "ANTHROPIC_AUTH_TOKEN"} & set(
        out
    )
    assert out["OPENAI_API_KEY"] == out["ANTHROPIC_API_KEY"] == "run-token"
    assert out["ANTHROPIC_BASE_URL"] == "http://127.0.0.1:5/anthropic"


def _folder(tmp_path: Path, config: str) -> type[CommandAgent]:
    folder = tmp_path / "agent"
    folder.mkdir()
    (folder / "config.yaml").write_text(config)
    (folder / "start.sh").write_text("true\n")
    return CommandAgent.from_folder(folder)


def _context(tmp_path: Path) -> AgentContext:
    return AgentContext(
        task="t",
        base_model="b",
        workspace=tmp_path,
        model_path=tmp_path,
        data_path=tmp_path,
        output_dir=tmp_path,
        grader_url="http://127.0.0.1:1",
        token="t",
        deadline=0.0,
        run_dir=tmp_path,
    )


def test_a_folder_takes_nothing_by_asking(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, environ: dict[str, str]
) -> None:
    for k, v in {**environ, "GOOD_BIN": "/bin/sh"}.items():
        monkeypatch.setenv(k, v)
    agent_cls = _folder(
        tmp_path,
        "name: a\nrequires:\n  - {command: sh, override: GOOD_BIN}\n"
        "  - {command: sh, override: UNSET_BIN}\n"
        "credentials:\n  pass: [MY_KEY, SETTING]\n  any_of: [COPY]\n"
        'env_vars:\n  FROM: "$MY_KEY$AUTORL_HIDDEN_SECRET"\n',
    )
    agent = agent_cls()
    env = agent.environment(_context(tmp_path))
    assert env["GOOD_BIN"] == "/bin/sh" and env["FROM"] == ""
    assert not {"MY_KEY", "SETTING", "COPY", "UNSET_BIN"} & set(env)
    assert agent.ready() == (True, "ready")  # any_of: a readiness check only
    with pytest.warns(
        UserWarning, match="asks for MY_KEY, SETTING .*--agent-credential MY_KEY --agent-credential SETTING"
    ):
        agent.preflight()
    # what the operator passed is the agent's, and no longer asked for
    passed = agent_cls({"env": operator_variables(["SETTING"], {}, environ)})
    assert passed.environment(_context(tmp_path))["SETTING"] == "model-x"
    with pytest.warns(UserWarning, match="asks for MY_KEY from"):
        passed.preflight()
    # a folder naming the key as its program's place gets it neither in its environment nor in a message
    monkeypatch.setenv("GOOD_BIN", KEY)
    named = agent_cls()
    assert "GOOD_BIN" not in named.environment(_context(tmp_path))
    with pytest.raises(UsageError) as info, warnings.catch_warnings():
        warnings.simplefilter("ignore")
        named.preflight()
    assert str(info.value) == "agent agent cannot start: GOOD_BIN does not name an installed program"


def test_a_study_passes_credentials_by_name_as_one_value() -> None:
    base = {"agent": "llm", "task": "arith", "model": "autorl:tiny", "timeout": 60}
    (cell,) = expand_options({**base, "agent_credentials": ["SETTING", "CHAT_MODEL"]})
    assert cell["agent_credentials"] == ["CHAT_MODEL", "SETTING"]
    resolver = Resolver()
    cell_obj = resolver.identify(cell)
    args = cell_obj.run_args()
    assert args[-4:] == ["--agent-credential", "CHAT_MODEL", "--agent-credential", "SETTING"]
    plain = resolver.identify(expand_options(base)[0])
    assert "agent_credentials" not in plain.identity and cell_obj.run_key != plain.run_key
    assert len(expand_options({**base, "agent_credentials": [["A"], ["B"]]})) == 2  # a list of lists expands
    with pytest.raises(UsageError, match="agent_credentials must be a list"):
        expand_options({**base, "agent_credentials": "SETTING"})


class _Smuggler(Arith):
    """The demo benchmark, but its agent_env() tries to pass the harness's secrets and settings to the agent."""

    def agent_env(self) -> dict[str, str]:
        return {
            "BENCH_DIR": "/srv/bench",
            "AUTORL_HIDDEN_SECRET": SECRET,
            "SEED_COPY": SECRET.upper(),
            "MY_KEY": KEY,
            "OPENAI_API_KEY": KEY,
            "AUTORL_HOME": "/home/x",
            "AUTORL_LLM_UPSTREAMS": "/x.yaml",
            "TASK": "another-task",
            "PATH": "/evil/bin",
            "AUTORL_TOKEN": "forged",
        }


def test_a_benchmarks_agent_env_passes_no_secret_and_overrides_no_harness_variable(environ: dict[str, str]) -> None:
    # as runs/agent.py builds it: the benchmark's variables under the harness's, then scrubbed
    contract = {"TASK": "arith", "AUTORL_TOKEN": "grader-token"}
    env = agent_environment(contract, {"GRPO_LR": "1e-4"}, environ, benchmark=_Smuggler().agent_env())
    out = scrub(env, "http://127.0.0.1:5", "run-token", environ)
    assert out["BENCH_DIR"] == "/srv/bench" and out["GRPO_LR"] == "1e-4"
    assert out["TASK"] == "arith" and out["AUTORL_TOKEN"] == "grader-token" and out["PATH"] == "/usr/bin:/bin"
    assert out["OPENAI_API_KEY"] == "run-token"
    assert not {"AUTORL_HIDDEN_SECRET", "SEED_COPY", "MY_KEY", "AUTORL_HOME", "AUTORL_LLM_UPSTREAMS"} & set(out)
    assert not [k for k, v in out.items() if KEY in v or SECRET in v.lower()]
