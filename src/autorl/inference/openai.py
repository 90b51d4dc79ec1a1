"""The ``openai`` backend: an external OpenAI-compatible server (e.g. ``vllm serve``), requests in parallel."""

from __future__ import annotations

import asyncio
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import httpx

from autorl.errors import EvaluationError
from autorl.inference.base import Backend, Completion, GenerationRequest, cut_at_stop


class OpenAIBackend(Backend):
    """Options: ``base_url`` (or ``AUTORL_OPENAI_BASE_URL``), ``api_key`` (or ``AUTORL_OPENAI_API_KEY``),
    ``model`` (default: the model directory's path, as ``vllm serve DIR`` names it), ``concurrency`` (32),
    ``timeout`` (600 s), ``retries`` (3)."""

    name = "openai"

    def __init__(self, options: dict[str, Any] | None = None) -> None:
        super().__init__(options)
        self.base_url = str(self.options.get("base_url") or os.environ.get("AUTORL_OPENAI_BASE_URL", ""))
        self.api_key = str(self.options.get("api_key") or os.environ.get("AUTORL_OPENAI_API_KEY", "EMPTY"))
        self.model = ""

    def identity(self) -> dict[str, Any]:
        return {"name": self.name, "base_url": self.base_url}

    def load(self, model_dir: Path, base_model_dir: Path | None = None) -> None:
        if not self.base_url:
            raise EvaluationError("the openai backend needs a server: set AUTORL_OPENAI_BASE_URL or base_url")
        self.model = str(self.options.get("model") or model_dir)

    def generate(self, requests: Sequence[GenerationRequest]) -> list[Completion]:
        return asyncio.run(self._generate(requests))

    async def _generate(self, requests: Sequence[GenerationRequest]) -> list[Completion]:
        limit = asyncio.Semaphore(int(self.options.get("concurrency", 32)))
        headers = {"Authorization": f"Bearer {self.api_key}"}
        timeout = float(self.options.get("timeout", 600))
        async with httpx.AsyncClient(base_url=self.base_url.rstrip("/"), headers=headers, timeout=timeout) as client:

            async def one(req: GenerationRequest) -> Completion:
                async with limit:
                    return await self._request(client, req)

            return list(await asyncio.gather(*(one(r) for r in requests)))

    async def _request(self, client: httpx.AsyncClient, req: GenerationRequest) -> Completion:
        body: dict[str, Any] = {
            "model": self.model,
            "max_tokens": req.max_new_tokens,
            "temperature": req.temperature,
            "top_p": req.top_p if req.temperature > 0 else 1.0,
            "n": req.n,
            "seed": req.seed,
        }
        if req.stop:
            body["stop"] = list(req.stop)
        chat = not isinstance(req.prompt, str)
        body["messages" if chat else "prompt"] = req.prompt
        path = "/chat/completions" if chat else "/completions"
        last: Exception | None = None
        for attempt in range(int(self.options.get("retries", 3)) + 1):
            try:
                resp = await client.post(path, json=body)
                if resp.status_code >= 500 or resp.status_code == 429:
                    raise httpx.HTTPStatusError(f"server answered {resp.status_code}", request=resp.request, response=resp)
                resp.raise_for_status()
                data = resp.json()
                choices = sorted(data["choices"], key=lambda c: c.get("index", 0))
                texts = [(c["message"]["content"] or "") if chat else c["text"] for c in choices]
                usage = data.get("usage") or {}
                return Completion(
                    [cut_at_stop(t, req.stop)[0] for t in texts],
                    int(usage.get("completion_tokens", 0)),
                    [str(c.get("finish_reason")) for c in choices],
                )
            except (httpx.HTTPError, KeyError, ValueError) as exc:
                last = exc
                await asyncio.sleep(min(2**attempt, 10) * 0.5)
        raise EvaluationError(f"the OpenAI-compatible server at {self.base_url} failed: {last}")
