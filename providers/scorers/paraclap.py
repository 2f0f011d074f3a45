"""ParaCLAP (`paraclap`), the CLAP-style model for computational paralinguistics (Jing,
Triantafyllopoulos and Schuller, Interspeech 2024), loaded as its official repository's
`eval.py` does (github.com/KeiKinn/ParaCLAP, `models_xin.py` and `eval.py`)."""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import NDArray
from pydantic import Field

from providers.local._settings import LocalOptions, hf, load_model_weights
from providers.scorers._two_tower import EmbeddingScorer, Vectors, download

WEIGHTS = "best.pth.tar"


class ParaClapOptions(LocalOptions):
    audio_model: str = Field(
        default="audeering/wav2vec2-large-robust-12-ft-emotion-msp-dim",
        description="the wav2vec 2.0 checkpoint the audio tower is built from",
    )
    text_model: str = Field(default="bert-base-uncased", description="the BERT text tower")
    embedding_dim: int = Field(default=768, gt=0)


def paraclap_module(audio_model: str, text_model: str, embedding_dim: int) -> Any:
    """The ParaCLAP network with the official repository's module names."""
    import torch
    from torch import nn
    from torch.nn import functional

    tf = hf()

    class Projection(nn.Module):
        def __init__(self, d_in: int, d_out: int, p: float = 0.5) -> None:
            super().__init__()
            self.linear1 = nn.Linear(d_in, d_out, bias=False)
            self.linear2 = nn.Linear(d_out, d_out, bias=False)
            self.layer_norm = nn.LayerNorm(d_out)
            self.drop = nn.Dropout(p)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            first = self.linear1(x)
            second = self.drop(self.linear2(functional.gelu(first)))
            out: torch.Tensor = self.layer_norm(first + second)
            return out

    class SpeechEncoder(nn.Module):
        def __init__(self, name: str) -> None:
            super().__init__()
            self.base = tf.Wav2Vec2Model.from_pretrained(name)
            self.hidden_size = int(self.base.config.hidden_size)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            out: torch.Tensor = self.base(x)["last_hidden_state"].mean(1)
            return out

    class TextEncoder(nn.Module):
        def __init__(self, name: str) -> None:
            super().__init__()
            self.base = tf.AutoModel.from_pretrained(name)

        def forward(self, x: dict[str, torch.Tensor]) -> torch.Tensor:
            out: torch.Tensor = self.base(**x)[0][:, 0, :]
            return out

    class ParaClap(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.audio_branch = SpeechEncoder(audio_model)
            self.text_branch = TextEncoder(text_model)
            self.audio_projection = Projection(self.audio_branch.hidden_size, embedding_dim)
            hidden = int(self.text_branch.base.config.hidden_size)
            self.text_projection = Projection(hidden, embedding_dim)
            self.logit_scale = nn.Parameter(torch.ones([]) * np.log(1 / 0.07))

    return ParaClap()


class ParaClapScorer(EmbeddingScorer):
    default_model = "KeiKinn/paraclap"
    sampling_rate = 16000
    Options = ParaClapOptions
    config: ParaClapOptions

    def identity(self) -> dict[str, Any]:
        names = ("audio_model", "text_model", "embedding_dim")
        return super().identity() | {name: getattr(self.config, name) for name in names}

    def load(self) -> Any:
        if self._loaded is not None:
            return self._loaded
        import torch

        config = self.config
        model = paraclap_module(config.audio_model, config.text_model, config.embedding_dim)
        weights = download(self.settings.checkpoint, WEIGHTS, self.settings.revision)
        model.load_state_dict(torch.load(weights, map_location="cpu", weights_only=True))
        tokenizer = hf().AutoTokenizer.from_pretrained(config.text_model)
        device, dtype = load_model_weights(model, self.settings)
        self._loaded = (model, tokenizer, device, dtype)
        return self._loaded

    def embed_texts(self, loaded: Any, texts: list[str]) -> tuple[Vectors, list[int]]:
        import torch

        model, tokenizer, device, _ = loaded
        counts = [len(tokenizer(t)["input_ids"]) for t in texts]
        tokens = tokenizer(texts, padding=True, truncation=True, return_tensors="pt").to(device)
        with torch.inference_mode():
            out = model.text_projection(model.text_branch(dict(tokens)))
        return out.float().cpu().numpy(), counts

    def embed_audio(self, loaded: Any, clips: list[NDArray[np.float32]]) -> Vectors:
        import torch

        model, _, device, dtype = loaded
        rows = []
        with torch.inference_mode():
            for clip in clips:  # whole clips of their own lengths, one at a time as eval.py
                audio = torch.from_numpy(clip).unsqueeze(0).to(device, dtype)
                rows.append(model.audio_projection(model.audio_branch(audio)).float().cpu())
        return torch.cat(rows).numpy()
