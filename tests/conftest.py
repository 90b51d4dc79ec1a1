from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parent.parent


def cli(
    *args: str, env: dict[str, str] | None = None, check: bool = False, timeout: float = 600, cwd: Path | None = None
) -> subprocess.CompletedProcess[str]:
    """Run the real `autorl` command line in a subprocess, as a user would."""
    # agents written by tests import tests.conftest: the sandbox lets them read the tests
    full_env = {"AUTORL_SANDBOX_RO": str(ROOT / "tests"), **os.environ, **(env or {})}
    proc = subprocess.run(
        [sys.executable, "-c", "from autorl.cli import main; main()", *args],
        capture_output=True,
        text=True,
        env=full_env,
        timeout=timeout,
        cwd=cwd,
    )
    if check and proc.returncode != 0:
        raise AssertionError(f"autorl {' '.join(args)} failed ({proc.returncode}):\n{proc.stdout}\n{proc.stderr}")
    return proc


@pytest.fixture(scope="session")
def shared_home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """An AUTORL_HOME shared by the tests that need the built-in tiny model (built once per session)."""
    return tmp_path_factory.mktemp("shared-home")


@pytest.fixture(scope="session")
def tiny_model(shared_home: Path) -> Path:
    from autorl.resources import resolve_model

    old = os.environ.get("AUTORL_HOME")
    os.environ["AUTORL_HOME"] = str(shared_home)
    try:
        return resolve_model("autorl:tiny").path
    finally:
        if old is None:
            os.environ.pop("AUTORL_HOME", None)
        else:
            os.environ["AUTORL_HOME"] = old


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    h = tmp_path / "home"
    monkeypatch.setenv("AUTORL_HOME", str(h))
    return h


def write_stub_checkpoint(
    path: Path, answers: dict[str, str] | None = None, behaviour: dict[str, Any] | None = None
) -> Path:
    """A checkpoint the grader accepts (config, valid safetensors, tokenizer) for the scripted backend."""
    import numpy as np
    from safetensors.numpy import save_file

    path.mkdir(parents=True, exist_ok=True)
    (path / "config.json").write_text(json.dumps({"model_type": "stub"}))
    save_file({"w": np.zeros((2, 2), dtype=np.float32)}, str(path / "model.safetensors"))
    (path / "tokenizer.json").write_text("{}")
    if answers is not None:
        (path / "answers.json").write_text(json.dumps(answers))
    if behaviour is not None:
        (path / "behaviour.json").write_text(json.dumps(behaviour))
    return path


def echo_answers(correct: int, split: str = "dev") -> dict[str, str]:
    """Answers for the echo benchmark: the first `correct` dev items right."""
    from autorl_example_plugin.stub import N_DEV, N_TEST

    ks = range(N_DEV) if split == "dev" else range(N_DEV, N_DEV + N_TEST)
    return {f"say {k}": str(k) for i, k in enumerate(ks) if i < correct}


@pytest.fixture
def stub_checkpoint() -> Iterator[Any]:
    yield write_stub_checkpoint


def as_snapshot(folder: Path) -> Any:
    """``folder`` as the handle a grader slot evaluates (:class:`autorl.grader.snapshot.Snapshot`): its kind as
    validation finds it, its content digest; for tests of the slot and its worker without the intake."""
    from autorl.evaluation.identity import model_hash
    from autorl.grader.snapshot import Snapshot
    from autorl.grader.validation import validate_checkpoint

    return Snapshot(folder, validate_checkpoint(folder).kind, model_hash(folder))


def write_lora(base: Path, target: Path, perturb: Any = None, **extra: Any) -> Path:
    """A rank-4 LoRA adapter (q_proj, v_proj unless ``extra`` says otherwise) of ``base``, non-zero from the
    start; ``perturb(peft_model)`` may move it further before it is saved."""
    import torch
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    torch.manual_seed(2)
    model = AutoModelForCausalLM.from_pretrained(str(base))
    options: dict[str, Any] = {"target_modules": ["q_proj", "v_proj"], **extra}
    peft = get_peft_model(model, LoraConfig(r=4, lora_alpha=8, init_lora_weights=False, **options))
    if perturb is not None:
        perturb(peft)
    peft.save_pretrained(str(target))
    return target


@pytest.fixture(scope="session")
def recorded_runs(tmp_path_factory: pytest.TempPathFactory) -> Any:
    """Two real recorded runs in one AUTORL_HOME (``tests/recorded_run.py``), made once per test session for the
    tests that read runs back: ``autorl items``, the DataFrames, the exports."""
    from .recorded_run import record_runs

    return record_runs(tmp_path_factory.mktemp("recorded"))
