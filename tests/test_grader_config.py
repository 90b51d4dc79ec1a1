"""GraderConfig.for_run: the one way a run, ``autorl grader serve`` and ``local_grader`` build a grader's config."""

from __future__ import annotations

from pathlib import Path

import pytest

from autorl.grader.config import GraderConfig
from autorl.resources import BenchmarkData, ResolvedModel


def _data(tmp_path: Path) -> BenchmarkData:
    return BenchmarkData(train_dir=tmp_path / "train", hidden_dir=tmp_path / "hidden")


def test_for_run_fills_paths_base_model_and_the_baseline_cache(tmp_path: Path) -> None:
    base = ResolvedModel("org/base", tmp_path / "models" / "base", "hub", "abc")
    config = GraderConfig.for_run(
        task="echo",
        workspace=tmp_path / "ws",
        output_dir=tmp_path / "ws" / "output",
        store_dir=tmp_path / "store",
        data=_data(tmp_path),
        base=base,
        backend="scripted",
        home=tmp_path / "home",
        limit=3,
        workers=[{"CUDA_VISIBLE_DEVICES": "1"}],
    )
    assert (config.task, config.backend, config.limit) == ("echo", "scripted", 3)
    assert config.workspace == str(tmp_path / "ws") and config.output_dir == str(tmp_path / "ws" / "output")
    assert config.hidden_dir == str(tmp_path / "hidden")
    assert (config.base_model, config.base_model_name) == (str(base.path), "org/base")
    assert config.baseline_cache_dir == str(tmp_path / "home" / "baselines")
    assert config.workers == [{"CUDA_VISIBLE_DEVICES": "1"}]
    for private in (tmp_path / "store", tmp_path / "home" / "baselines"):
        assert private.stat().st_mode & 0o777 == 0o700
    config.save(tmp_path / "config.json")
    assert GraderConfig.load(tmp_path / "config.json") == config
    assert (tmp_path / "config.json").stat().st_mode & 0o777 == 0o600


def test_for_run_without_base_or_home(tmp_path: Path) -> None:
    config = GraderConfig.for_run(
        task="echo",
        workspace=tmp_path,
        output_dir=tmp_path / "output",
        store_dir=tmp_path / "store",
        data=_data(tmp_path),
        base=None,
        backend="hf",
    )
    assert config.base_model is None and config.base_model_name is None and config.baseline_cache_dir is None
    assert config.agent_token != config.admin_token


def test_for_run_refuses_an_unknown_override(tmp_path: Path) -> None:
    with pytest.raises(TypeError, match="eval_timeot"):
        GraderConfig.for_run(
            task="echo",
            workspace=tmp_path,
            output_dir=tmp_path,
            store_dir=tmp_path / "s",
            data=_data(tmp_path),
            base=None,
            backend="hf",
            eval_timeot=3.0,
        )
