"""Built-in inference backends (each imports its heavy libraries only when used)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from autorl.hookspecs import hookimpl


@hookimpl
def register_backends(register: Callable[[type[Any]], None]) -> None:
    from autorl.inference.hf import HFBackend
    from autorl.inference.openai import OpenAIBackend
    from autorl.inference.vllm import VLLMBackend

    register(HFBackend)
    register(VLLMBackend)
    register(OpenAIBackend)
