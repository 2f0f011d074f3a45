"""Chat-completions judges through the openai SDK (`openai-audio`, `openai`, `openai-compatible`;
docs/providers.md): audio as base64 WAV `input_audio` parts or `audio_url` data URLs."""

from __future__ import annotations

from types import ModuleType
from typing import TYPE_CHECKING, Any, ClassVar, Literal

from pydantic import Field, field_validator

from harness.core.errors import ConfigError
from harness.core.types import AudioRef, ChatRequest, ChatResponse, ProviderConfig
from providers._expected_score import TokenChoice, api_expected_score
from providers.api._shared import MALFORMED_ANSWER_ERRORS, ApiOptions, parse_retry_after, wav_base64
from providers.api.judge import ApiJudge
from providers.batch import BatchApi

if TYPE_CHECKING:
    import openai
    from openai.types.chat import ChatCompletion


def _openai() -> ModuleType:
    """The openai SDK, imported only when needed: a run answered from the cache never is."""
    import openai

    return openai


JsonMode = Literal["prompt", "schema", "object"]
RESERVED_BODY_FIELDS = frozenset({"model", "messages", "stream", "n"})


class OpenAIOptions(ApiOptions):
    json_mode: JsonMode | None = Field(
        default=None, description="prompt, schema or object [default: the provider's]"
    )
    audio_format: Literal["input_audio", "audio_url"] = "input_audio"
    extra_body: dict[str, Any] = Field(
        default_factory=dict, description="extra request fields for the server"
    )
    reasoning_effort: Literal["minimal", "low", "medium", "high"] | None = Field(
        default=None, description="reasoning models (GPT-5 family): how hard they think"
    )

    @field_validator("extra_body")
    @classmethod
    def _not_the_harness_fields(cls, value: dict[str, Any]) -> dict[str, Any]:
        # Sent last, these would replace what the harness sends while its records, report,
        # prices and cache name the configured model: refused, not silently overridden.
        taken = sorted(set(value) & RESERVED_BODY_FIELDS)
        if taken:
            raise ValueError(
                f"extra_body may not set {', '.join(taken)}: the harness sends it from its "
                "own settings (set provider.model for another model)"
            )
        return value


class ChatCompletionsJudge(ApiJudge["openai.AsyncOpenAI"]):
    """The public base of chat-completions judges: a new service is a subclass naming its
    `label`, `official_base_url`, `url_variable`, `key_variables` (docs/providers.md)."""

    label: ClassVar[str] = "OpenAI"
    official_base_url: ClassVar[str | None] = "https://api.openai.com/v1"
    url_variable: ClassVar[str] = "OPENAI_BASE_URL"
    key_variables: ClassVar[tuple[str, ...]] = ("OPENAI_API_KEY",)
    default_json_mode: ClassVar[JsonMode] = "prompt"
    audio_tokens_per_second: ClassVar[float] = 10.0
    # OpenAI's tokenizers keep "10" as one token; most open models' (Qwen's) split digits.
    splits_digits: ClassVar[bool] = False
    max_tokens_field: ClassVar[str] = "max_completion_tokens"
    Options = OpenAIOptions
    config: OpenAIOptions

    def __init__(self, config: ProviderConfig) -> None:
        super().__init__(config)
        self.json_mode: JsonMode = self.config.json_mode or self.default_json_mode
        if self._batch_settings is not None and self.batch_refusal:
            raise ConfigError("experiment file", "provider.batch", self.batch_refusal)

    # Why this provider's requests cannot go through its batch API (None: they can).
    batch_refusal: ClassVar[str | None] = None

    def batch_api(self) -> BatchApi | None:
        if self._batch_settings is None:
            return None
        from providers.api.openai_batch import OpenAIBatchApi

        return OpenAIBatchApi(self, self._batch_settings)

    def identity(self) -> dict[str, Any]:
        return super().identity() | {
            "json_mode": self.json_mode,
            "audio_format": self.config.audio_format,
        }

    def make_client(self, base_url: str | None, key: str) -> openai.AsyncOpenAI:
        from providers.api._bounded_body import openai_transport

        sdk = _openai()
        client: openai.AsyncOpenAI = sdk.AsyncOpenAI(
            api_key=key,
            base_url=base_url,
            max_retries=0,
            timeout=self.config.timeout_s,
            http_client=sdk.DefaultAsyncHttpxClient(transport=openai_transport(self.headers_seen)),
        )
        return client

    def request_body(self, request: ChatRequest) -> dict[str, Any]:
        content: list[dict[str, Any]] = []
        for part in request.parts:
            if not isinstance(part, AudioRef):
                content.append({"type": "text", "text": part})
            elif self.config.audio_format == "input_audio":
                data = wav_base64(part, self.sample_rate)
                content.append(
                    {"type": "input_audio", "input_audio": {"data": data, "format": "wav"}}
                )
            else:
                url = wav_base64(part, self.sample_rate, data_url=True)
                content.append({"type": "audio_url", "audio_url": {"url": url}})
        messages: list[dict[str, Any]] = []
        if request.system:
            messages.append({"role": "system", "content": request.system})
        messages.append({"role": "user", "content": content})
        for turn in request.follow_ups:
            if turn.answer:  # an empty or blocked answer has no turn to show
                messages.append({"role": "assistant", "content": turn.answer})
            messages.append({"role": "user", "content": turn.reply})
        body: dict[str, Any] = {
            "model": self.model,
            "messages": messages,
            "temperature": self.config.temperature,
        }
        if self.config.max_tokens is not None:
            body[self.max_tokens_field] = self.config.max_tokens
        if self.config.seed is not None:
            body["seed"] = self.config.seed
        if request.response_schema is not None and self.json_mode == "schema":
            body["response_format"] = {
                "type": "json_schema",
                "json_schema": {"name": "answer", "schema": request.response_schema},
            }
        elif request.response_schema is not None and self.json_mode == "object":
            body["response_format"] = {"type": "json_object"}
        if self.config.reasoning_effort is not None:
            body["reasoning_effort"] = self.config.reasoning_effort
        if self.config.score == "expected":
            body["logprobs"] = True
            body["top_logprobs"] = self.config.top_logprobs
        if self.config.extra_body:
            body["extra_body"] = dict(self.config.extra_body)
        return body

    def read_completion(self, completion: ChatCompletion) -> ChatResponse:
        """The answer in a chat completion (online, or a batch's output line)."""
        response = _chat_response(completion)
        if self.config.score == "expected":
            response.extra.update(_expected_score(completion, self.splits_digits))
        return response

    def build_request(self, request: ChatRequest) -> dict[str, Any]:
        return self.request_body(request)

    async def send(self, client: openai.AsyncOpenAI, built: dict[str, Any]) -> ChatResponse:
        completion: ChatCompletion = await client.chat.completions.create(**built)
        self.check_model(completion.model)
        return self.read_completion(completion)

    def is_malformed(self, exc: BaseException) -> bool:
        malformed = (_openai().APIResponseValidationError, *MALFORMED_ANSWER_ERRORS)
        return isinstance(exc, malformed)

    def status_code(self, exc: BaseException) -> int | None:
        return exc.status_code if isinstance(exc, _openai().APIStatusError) else None

    def error_message(self, exc: BaseException) -> str:
        assert isinstance(exc, _openai().APIStatusError)
        body = exc.body
        message = body.get("message") if isinstance(body, dict) else None
        return str(message or exc.message)

    def retry_after(self, exc: BaseException) -> float | None:
        assert isinstance(exc, _openai().APIStatusError)
        return parse_retry_after(exc.response.headers.get("retry-after"))

    def is_timeout(self, exc: BaseException) -> bool:
        return isinstance(exc, _openai().APITimeoutError)

    def is_connection_error(self, exc: BaseException) -> bool:
        return isinstance(exc, _openai().APIConnectionError)


def _chat_response(completion: ChatCompletion) -> ChatResponse:
    extra: dict[str, Any] = {}
    if not completion.choices:
        raise ValueError("the answer has no choices")
    choice = completion.choices[0]
    text = choice.message.content or ""
    if choice.finish_reason != "stop":
        extra["finish_reason"] = choice.finish_reason
    if choice.finish_reason == "content_filter":
        extra["blocked"] = "content_filter"
    if choice.message.refusal:
        extra["refusal"] = choice.message.refusal
    if not text and not extra:
        extra["empty"] = True
    usage = completion.usage
    if usage is None:
        return ChatResponse(text, None, None, extra)
    details = usage.prompt_tokens_details
    if details is not None and details.audio_tokens:
        extra["input_audio_tokens"] = details.audio_tokens
    if details is not None and details.cached_tokens:
        extra["cached_input_tokens"] = details.cached_tokens
    output = usage.completion_tokens_details
    if output is not None and output.reasoning_tokens:
        extra["reasoning_tokens"] = output.reasoning_tokens
    return ChatResponse(text, usage.prompt_tokens, usage.completion_tokens, extra)


def _expected_score(completion: ChatCompletion, splits_digits: bool) -> dict[str, Any]:
    choice = completion.choices[0] if completion.choices else None
    content = choice.logprobs.content if choice is not None and choice.logprobs else None
    if not content:
        return {"expected_score": None}
    tokens = [
        TokenChoice(t.token, t.logprob, tuple((a.token, a.logprob) for a in t.top_logprobs))
        for t in content
    ]
    return api_expected_score(tokens, splits_digits=splits_digits) or {"expected_score": None}


class OpenAIAudioJudge(ChatCompletionsJudge):
    """GPT-4o-audio / gpt-audio on the OpenAI API (JSON asked for in the prompt)."""

    default_model = "gpt-4o-audio-preview"
    batch_refusal = (
        "openai-audio cannot use batch: true: OpenAI's Batch API does not list the "
        "audio-input chat models (gpt-4o-audio-preview, gpt-audio); run it online, or use "
        "`openai` with inputs music: caption (docs/batch.md)"
    )

    def request_body(self, request: ChatRequest) -> dict[str, Any]:
        return {**super().request_body(request), "modalities": ["text"]}


class OpenAIJudge(ChatCompletionsJudge):
    """Any chat model on the OpenAI API (GPT-5-mini, ...; GPT-5 models take only
    `temperature: 1.0` and give no log-probabilities), JSON schema mode."""

    default_model = "gpt-5-mini"
    default_json_mode = "schema"


class OpenAICompatibleJudge(ChatCompletionsJudge):
    """Any OpenAI-compatible server (vLLM, SGLang, ...): needs a base URL and a model name."""

    label = "OpenAI-compatible server"
    official_base_url = None  # self-hosted: there is no official service to compare with
    default_json_mode = "schema"
    needs_key = False
    splits_digits = True
    audio_tokens_per_second = 25.0  # Qwen2.5-Omni's audio encoder: one token per 40 ms
    max_tokens_field = "max_tokens"

    def __init__(self, config: ProviderConfig) -> None:
        super().__init__(config)
        if not self.urls:
            raise ConfigError(
                "experiment file",
                "provider.base_url",
                f"openai-compatible needs the server's URL: set provider.base_url or {self.url_variable}",
            )
        if not self.config.model:
            raise ConfigError(
                "experiment file",
                "provider.model",
                "openai-compatible needs the model name the server serves (e.g. Qwen/Qwen2.5-Omni-7B)",
            )
