"""Gemini judges through google-genai (docs/providers.md): audio inline as WAV parts, JSON mode
with the variant's schema. Keys: GEMINI_API_KEY or GOOGLE_API_KEY; URL: GEMINI_BASE_URL."""

from __future__ import annotations

import importlib.util
import re
from functools import partial
from typing import Annotated, Any, ClassVar, Literal

import httpx
from google.genai import Client, errors, types
from pydantic import Field

from harness.core.audio import encode_wav
from harness.core.types import (
    CALL,
    AudioRef,
    ChatRequest,
    ChatResponse,
    ProviderConfig,
)
from providers._expected_score import TokenChoice, api_expected_score
from providers.api._bounded_body import BoundedTransport, bounded_aiohttp_body
from providers.api._shared import ApiOptions, parse_retry_after
from providers.api.judge import ApiJudge
from providers.batch import BatchApi

OFFICIAL_BASE_URL = "https://generativelanguage.googleapis.com"
_RETRY_DELAY = re.compile(r"^(\d+(?:\.\d+)?)s$")


class GeminiOptions(ApiOptions):
    json_mode: Literal["schema", "object", "prompt"] = "schema"
    thinking_budget: int | None = Field(default=None, ge=-1, description="2.5-series models")
    http_client: Annotated[Literal["aiohttp", "httpx"] | None, CALL] = Field(
        default=None, description="[default: aiohttp where installed]"
    )


class GeminiJudge(ApiJudge[Client]):
    label = "Gemini"
    official_base_url = OFFICIAL_BASE_URL
    url_variable = "GEMINI_BASE_URL"
    key_variables = ("GEMINI_API_KEY", "GOOGLE_API_KEY")
    keyless_placeholder = "unused"
    default_model = "gemini-2.5-flash"
    audio_tokens_per_second: ClassVar[float] = 32.0
    Options = GeminiOptions
    config: GeminiOptions

    def __init__(self, config: ProviderConfig) -> None:
        super().__init__(config)
        has_aiohttp = importlib.util.find_spec("aiohttp") is not None
        self.http_client = self.config.http_client or ("aiohttp" if has_aiohttp else "httpx")
        self._http: dict[int, httpx.AsyncClient] = {}  # the httpx client of each SDK client

    def batch_api(self) -> BatchApi | None:
        if self._batch_settings is None:
            return None
        from providers.api.gemini_batch import GeminiBatchApi

        return GeminiBatchApi(self, self._batch_settings)

    def identity(self) -> dict[str, Any]:
        return super().identity() | {"json_mode": self.config.json_mode}

    def make_client(self, base_url: str | None, key: str) -> Client:
        http = None
        if self.http_client == "httpx":
            limit = self.config.max_concurrency
            limits = httpx.Limits(max_connections=limit, max_keepalive_connections=limit)
            http = httpx.AsyncClient(
                timeout=self.config.timeout_s,
                transport=BoundedTransport(
                    httpx.AsyncHTTPTransport(limits=limits), observe=self.headers_seen
                ),
            )
        # The SDK's own retries are off (attempts=1), including its silent retry of dropped
        # connections: the runner retries, with its backoff and limits.
        options = types.HttpOptions(
            base_url=base_url,
            timeout=int(self.config.timeout_s * 1000),
            retry_options=types.HttpRetryOptions(attempts=1),
            httpx_async_client=http,
            # aiohttp: each request's body is read with a bound on its decompressed size, and
            # no redirect is followed (aiohttp would follow one to any origin with
            # x-goog-api-key; httpx, the other transport, follows none by default)
            async_client_args=None
            if http
            else {
                "middlewares": (partial(bounded_aiohttp_body, observe=self.headers_seen),),
                "allow_redirects": False,
            },
        )
        client = Client(vertexai=False, api_key=key, http_options=options)
        if http is not None:
            self._http[id(client)] = http
        return client

    async def close_client(self, client: Client) -> None:
        await client.aio.aclose()
        http = self._http.pop(id(client), None)
        if http is not None:
            await http.aclose()

    def contents(self, request: ChatRequest) -> list[types.Content]:
        parts = [
            types.Part.from_bytes(data=encode_wav(p.path, self.sample_rate), mime_type="audio/wav")
            if isinstance(p, AudioRef)
            else types.Part.from_text(text=p)
            for p in request.parts
        ]
        contents = [types.Content(role="user", parts=parts)]
        for turn in request.follow_ups:
            if turn.answer:  # an empty or blocked answer has no turn to show
                answer = types.Part.from_text(text=turn.answer)
                contents.append(types.Content(role="model", parts=[answer]))
            reply = types.Part.from_text(text=turn.reply)
            contents.append(types.Content(role="user", parts=[reply]))
        return contents

    def generation_config(self, request: ChatRequest) -> types.GenerateContentConfig:
        settings: dict[str, Any] = {
            "system_instruction": request.system or None,
            "temperature": self.config.temperature,
            "candidate_count": 1,
        }
        if self.config.max_tokens is not None:
            settings["max_output_tokens"] = self.config.max_tokens
        if self.config.seed is not None:
            settings["seed"] = self.config.seed
        if request.response_schema is not None and self.config.json_mode != "prompt":
            settings["response_mime_type"] = "application/json"
            if self.config.json_mode == "schema":
                settings["response_json_schema"] = request.response_schema
        if self.config.score == "expected":
            settings["response_logprobs"] = True
            settings["logprobs"] = self.config.top_logprobs
        if self.config.thinking_budget is not None:
            settings["thinking_config"] = types.ThinkingConfig(
                thinking_budget=int(self.config.thinking_budget)
            )
        return types.GenerateContentConfig(**settings)

    def build_request(
        self, request: ChatRequest
    ) -> tuple[list[types.Content], types.GenerateContentConfig]:
        return self.contents(request), self.generation_config(request)

    async def send(
        self, client: Client, built: tuple[list[types.Content], types.GenerateContentConfig]
    ) -> ChatResponse:
        contents, config = built
        response = await client.aio.models.generate_content(
            model=self.model, contents=contents, config=config
        )
        self.check_model(response.model_version)
        return self.read_response(response)

    def read_response(self, response: types.GenerateContentResponse) -> ChatResponse:
        """The answer in a response (online, or one of a batch job's inline responses)."""
        answer = _chat_response(response)
        if self.config.score == "expected":
            answer.extra.update(_expected_score(response))
        return answer

    def status_code(self, exc: BaseException) -> int | None:
        return (exc.code or 0) if isinstance(exc, errors.APIError) else None

    def error_message(self, exc: BaseException) -> str:
        assert isinstance(exc, errors.APIError)
        return f"{exc.status or ''} {exc.message or ''}"

    def retry_after(self, exc: BaseException) -> float | None:
        assert isinstance(exc, errors.APIError)
        headers = getattr(exc.response, "headers", None) or {}
        return parse_retry_after(headers.get("retry-after")) or _retry_info(exc.details)

    def is_auth_failure(self, exc: BaseException) -> bool:
        """Gemini answers a key it does not accept with 400 (reason API_KEY_INVALID)."""
        return isinstance(exc, errors.APIError) and _key_refused(exc.details)

    def is_timeout(self, exc: BaseException) -> bool:
        return isinstance(
            exc, httpx.TimeoutException if self.http_client == "httpx" else TimeoutError
        )

    def is_connection_error(self, exc: BaseException) -> bool:
        if self.http_client == "httpx":
            return isinstance(exc, httpx.TransportError)
        import aiohttp

        return isinstance(exc, aiohttp.ClientError)


def _key_refused(details: Any) -> bool:
    """Whether a Gemini error says the API key is not valid (it answers 400, not 401)."""
    error = details.get("error", details) if isinstance(details, dict) else {}
    reasons = [d.get("reason") for d in error.get("details") or [] if isinstance(d, dict)]
    return "API_KEY_INVALID" in reasons or "API key not valid" in str(error.get("message"))


def _retry_info(details: Any) -> float | None:
    """The retry delay Gemini puts in a 429's `google.rpc.RetryInfo` detail ("36s")."""
    error = details.get("error", details) if isinstance(details, dict) else {}
    for detail in error.get("details") or []:
        delay = detail.get("retryDelay") if isinstance(detail, dict) else None
        match = _RETRY_DELAY.match(delay) if isinstance(delay, str) else None
        if match:
            return parse_retry_after(match.group(1))
    return None


def _expected_score(response: types.GenerateContentResponse) -> dict[str, Any]:
    """The expected score from the answer's token log-probabilities (None without them).
    Gemini's tokenizer writes each digit as a token."""
    candidate = response.candidates[0] if response.candidates else None
    result = candidate.logprobs_result if candidate is not None else None
    if result is None or not result.chosen_candidates or not result.top_candidates:
        return {"expected_score": None}
    tokens = [
        TokenChoice(
            chosen.token or "",
            chosen.log_probability or 0.0,
            tuple((c.token or "", c.log_probability or 0.0) for c in top.candidates or []),
        )
        for chosen, top in zip(result.chosen_candidates, result.top_candidates, strict=False)
    ]
    return api_expected_score(tokens, splits_digits=True) or {"expected_score": None}


def _chat_response(response: types.GenerateContentResponse) -> ChatResponse:
    extra: dict[str, Any] = {}
    feedback = response.prompt_feedback
    if feedback is not None and feedback.block_reason is not None:
        extra["blocked"] = str(feedback.block_reason.value)
    if not response.candidates and "blocked" not in extra:
        raise ValueError("the answer has neither candidates nor a block reason")
    candidate = response.candidates[0] if response.candidates else None
    finish = candidate.finish_reason if candidate is not None else None
    if finish is not None and finish != types.FinishReason.STOP:
        extra["finish_reason"] = str(finish.value)
    text = response.text or ""
    if not text and not extra:
        extra["empty"] = True
    usage = response.usage_metadata
    input_tokens = output_tokens = None
    if usage is not None:
        input_tokens = usage.prompt_token_count
        if usage.candidates_token_count is not None or usage.thoughts_token_count is not None:
            output_tokens = (usage.candidates_token_count or 0) + (usage.thoughts_token_count or 0)
        if usage.thoughts_token_count:
            extra["thoughts_tokens"] = usage.thoughts_token_count
        if usage.cached_content_token_count:
            extra["cached_input_tokens"] = usage.cached_content_token_count
        for detail in usage.prompt_tokens_details or []:
            if detail.modality == types.MediaModality.AUDIO and detail.token_count:
                extra["input_audio_tokens"] = detail.token_count
    return ChatResponse(text, input_tokens, output_tokens, extra)
