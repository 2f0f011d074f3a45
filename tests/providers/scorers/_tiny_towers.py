"""Tiny checkpoints of the two-tower scorers whose model code lives in providers/ (msclap's
and ParaCLAP's), built with that very code over tiny text and audio models of the real classes
(tests/support/tiny_models.py), and saved the way the real weights are released."""

from __future__ import annotations

from pathlib import Path

from tests.support.tiny_models import _seeded, tiny_bert, tiny_gpt2, tiny_wav2vec2


def tiny_ms_clap(directory: Path, version: str) -> tuple[Path, Path]:
    """msclap's model of `version` (its audio encoder at full size, Cnn14 or HTS-AT, as its
    config builds it) over a tiny text model of the same class (BERT for 2022, GPT-2 for
    2023), saved as msclap ships weights ({"model": state dict}); (weights file, text model)."""
    import torch

    from providers.scorers.ms_clap import msclap_config, msclap_models

    args = msclap_config(version)
    text = (tiny_bert if version == "2022" else tiny_gpt2)(
        directory / ("tiny-bert" if version == "2022" else "tiny-gpt2")
    )
    _seeded()
    model = msclap_models().CLAP(
        audioenc_name=args["audioenc_name"],
        sample_rate=args["sampling_rate"],
        window_size=args["window_size"],
        hop_size=args["hop_size"],
        mel_bins=args["mel_bins"],
        fmin=args["fmin"],
        fmax=args["fmax"],
        classes_num=args["num_classes"],
        out_emb=args["out_emb"],
        text_model=str(text),
        transformer_embed_dim=32,
        d_proj=args["d_proj"],
    )
    weights = directory / f"CLAP_weights_{version}.pth"
    torch.save({"model": model.state_dict()}, weights)
    return weights, text


def tiny_paraclap(directory: Path) -> tuple[Path, Path, Path]:
    """ParaCLAP over a tiny wav2vec 2.0 and a tiny BERT, its weights saved as the release
    (a plain state dict); (weights file, audio model, text model)."""
    import torch

    from providers.scorers.paraclap import paraclap_module

    audio = tiny_wav2vec2(directory / "tiny-wav2vec2")
    text = tiny_bert(directory / "tiny-bert")
    _seeded()
    weights = directory / "best.pth.tar"
    torch.save(paraclap_module(str(audio), str(text), 8).state_dict(), weights)
    return weights, audio, text
