"""The ``openai`` backend: an external OpenAI-compatible server (e.g. ``vllm serve``), requests in parallel.

The server must serve the checkpoint being scored under its own path (``vllm serve DIR``, or a LoRA module
whose path is DIR), checked against its ``/models`` at load. Prompts go to ``/completions`` as token ids,
tokenized here the way every backend tokenizes them (chat messages rendered by the checkpoint's template
first), so the server neither adds a BOS nor applies a chat template of its own.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypedDict

import httpx

from autorl.errors import EvaluationError, UsageError
from autorl.inference.base import Backend, Completion, GenerationRequest, cut_at_stop, prompt_token_ids
from autorl.inference.loading import load_tokenizer, tokenizer_dir

if TYPE_CHECKING:  # typing has it from Python 3.11; annotations are never evaluated here (``from __future__``)
    from typing import NotRequired


class CompletionBody(TypedDict):
    """A ``/completions`` request as this backend sends it (:meth:`OpenAIBackend.request_body`)."""

    model: str
    #: token ids
    prompt: list[int]
    max_tokens: int
    temperature: float
    top_p: float
    n: int
    seed: int
    stop: NotRequired[list[str]]


class OpenAIBackend(Backend):
    """Options: ``base_url`` (or ``AUTORL_OPENAI_BASE_URL``), ``api_key`` (or ``AUTORL_OPENAI_API_KEY``),
    ``concurrency`` (32), ``timeout`` (600 s), ``retries`` (3).

    There is no ``model`` option: a fixed served model name would score every submission as that one model.
    The model asked for is the server's entry whose id or root is the checkpoint's path.
    """

    name = "openai"

    def __init__(self, options: dict[str, Any] | None = None) -> None:
        super().__init__(options)
        self.base_url = str(self.options.get("base_url") or os.environ.get("AUTORL_OPENAI_BASE_URL", ""))
        self.api_key = str(self.options.get("api_key") or os.environ.get("AUTORL_OPENAI_API_KEY", "EMPTY"))
        self.model = ""
        self.tokenizer: Any = None
        if self.options.get("model"):
            raise UsageError(
                "the openai backend takes no 'model' option: it scores the model the server serves under the "
                "checkpoint's own path (start it with `vllm serve CHECKPOINT_DIR`)"
            )

    def identity(self) -> dict[str, Any]:
        # the served model is the checkpoint itself (checked at load), which the model hash covers
        return {"name": self.name, "base_url": self.base_url, "served_model": "checkpoint path", "prompt": "token ids"}

    def load(self, model_dir: Path, base_model_dir: Path | None = None) -> None:
        if not self.base_url:
            raise EvaluationError("the openai backend needs a server: set AUTORL_OPENAI_BASE_URL or base_url")
        self.model = self.served_model(model_dir)
        self.tokenizer = load_tokenizer(tokenizer_dir(model_dir, base_model_dir))

    def served_model(self, model_dir: Path) -> str:
        """The id under which the server serves ``model_dir``; an error naming what it serves otherwise."""
        headers = {"Authorization": f"Bearer {self.api_key}"}
        try:
            resp = httpx.get(f"{self.base_url.rstrip('/')}/models", headers=headers, timeout=30)
            resp.raise_for_status()
            entries = [e for e in resp.json()["data"] if isinstance(e, dict)]
        except (httpx.HTTPError, KeyError, TypeError, ValueError) as exc:
            raise EvaluationError(
                f"the OpenAI-compatible server at {self.base_url} did not list its models: {exc}"
            ) from exc
        wanted = {str(model_dir), str(model_dir.resolve())}
        for entry in entries:
            if str(entry.get("id")) in wanted or str(entry.get("root")) in wanted:
                return str(entry["id"])
        served = ", ".join(str(e.get("id")) for e in entries[:5]) or "nothing"
        raise EvaluationError(
            f"the server at {self.base_url} does not serve {model_dir} (it serves {served}); "
            f"start it with `vllm serve {model_dir}`"
        )

    def request_body(self, req: GenerationRequest) -> CompletionBody:
        """The ``/completions`` request for ``req``: the prompt as the token ids every backend feeds the model."""
        body: CompletionBody = {
            "model": self.model,
            "prompt": prompt_token_ids(self.tokenizer, req.prompt),
            "max_tokens": req.max_new_tokens,
            "temperature": req.temperature,
            "top_p": req.top_p if req.temperature > 0 else 1.0,
            "n": req.n,
            "seed": req.seed,
        }
        if req.stop:
            body["stop"] = list(req.stop)
        return body

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
        body = self.request_body(req)
        last: Exception | None = None
        for attempt in range(int(self.options.get("retries", 3)) + 1):
            try:
                resp = await client.post("/completions", json=body)
                if resp.status_code >= 500 or resp.status_code == 429:
                    raise httpx.HTTPStatusError(
                        f"server answered {resp.status_code}", request=resp.request, response=resp
                    )
                resp.raise_for_status()
                data = resp.json()
                choices = sorted(data["choices"], key=lambda c: c.get("index", 0))
                texts = [str(c["text"]) for c in choices]
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
