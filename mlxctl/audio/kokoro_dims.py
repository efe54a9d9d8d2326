"""mlx-audio's Kokoro config for converted weights: dimensions read from the weights and graph."""

from __future__ import annotations

import re
from typing import Any

import numpy as np

from mlxctl.audio.kokoro_scopes import module_of
from mlxctl.audio.onnx_reader import OnnxGraph
from mlxctl.errors import ModelFormatError

SAMPLE_RATE = 24000


def _count(weights: dict[str, np.ndarray], pattern: str) -> int:
    rx = re.compile(pattern)
    return len({m.group(1) for k in weights if (m := rx.match(k))})


def _node_attr(graph: OnnxGraph, module: str, attr: str) -> list[int] | None:
    for node in graph.nodes:
        if node.op in ("Conv", "ConvInteger", "ConvTranspose") and "stft" not in node.name:
            try:
                if module_of(node.name) == module:
                    return node.attrs.get(attr)
            except ModelFormatError:
                continue
    return None


def kokoro_config(graph: OnnxGraph, weights: dict[str, np.ndarray], vocab: dict[str, int]) -> dict[str, Any]:
    """mlx-audio's Kokoro ``ModelConfig`` with the dimensions read from the weights."""
    w = weights
    try:
        hidden = w["bert_encoder.weight"].shape[0]
        bert_hidden, emb = w["bert.encoder.embedding_hidden_mapping_in.weight"].shape
        ups = _count(w, r"^decoder\.generator\.ups\.(\d+)\.weight_v$")
        kernels = [int(w[f"decoder.generator.resblocks.{j}.convs1.0.weight_v"].shape[2])
                   for j in range(_count(w, r"^decoder\.generator\.resblocks\.(\d+)\.") // max(ups, 1))]
        dilations = [[(_node_attr(graph, f"decoder.generator.resblocks.{j}.convs1.{i}", "dilations") or [1])[0]
                      for i in range(3)] for j in range(len(kernels))]
        up_rates = [(_node_attr(graph, f"decoder.generator.ups.{i}", "strides") or [0])[0] for i in range(ups)]
        up_kernels = [int(w[f"decoder.generator.ups.{i}.weight_v"].shape[2]) for i in range(ups)]
        n_fft = int(w["decoder.generator.conv_post.weight_v"].shape[0]) - 2
        query = "bert.encoder.albert_layer_groups.0.albert_layers.0.attention.query"
        layers = sum(1 for n in graph.nodes if n.op == "MatMulInteger" and n.name.startswith("/encoder/bert/")
                     and module_of(n.name) == query)  # ALBERT runs its one layer this many times
        config = {
            "model_type": "kokoro",
            "istftnet": {
                "upsample_kernel_sizes": up_kernels,
                "upsample_rates": up_rates,
                "gen_istft_hop_size": _hop_size(graph, n_fft),
                "gen_istft_n_fft": n_fft,
                "resblock_dilation_sizes": dilations,
                "resblock_kernel_sizes": kernels,
                "upsample_initial_channel": int(w["decoder.generator.ups.0.weight_v"].shape[0]),
            },
            "dim_in": int(w["decoder.asr_res.0.weight_v"].shape[0]),
            "dropout": 0.2,
            "hidden_dim": int(hidden),
            "max_conv_dim": int(hidden),
            "max_dur": int(w["predictor.duration_proj.linear_layer.weight"].shape[0]),
            "multispeaker": True,
            "n_layer": _count(w, r"^text_encoder\.cnn\.(\d+)\."),
            "n_mels": 80,
            "n_token": int(w["text_encoder.embedding.weight"].shape[0]),
            "style_dim": int(w["predictor.text_encoder.lstms.1.fc.weight"].shape[1]),
            "text_encoder_kernel_size": int(w["text_encoder.cnn.0.0.weight_v"].shape[2]),
            "plbert": {
                "hidden_size": int(bert_hidden),
                "num_attention_heads": int(bert_hidden) // 64,
                "intermediate_size": int(w["bert.encoder.albert_layer_groups.0.albert_layers.0.ffn.weight"].shape[0]),
                "max_position_embeddings": int(w["bert.embeddings.position_embeddings.weight"].shape[0]),
                "num_hidden_layers": layers,
                "embedding_size": int(emb),
                "dropout": 0.1,
            },
            "sample_rate": SAMPLE_RATE,
            "vocab": vocab,
        }
    except KeyError as exc:
        raise ModelFormatError(f"this Kokoro ONNX file lacks the weight {exc.args[0]}") from None
    if not layers or 0 in up_rates:
        raise ModelFormatError("cannot read Kokoro's dimensions from this ONNX file")
    if max(vocab.values(), default=0) >= config["n_token"]:
        raise ModelFormatError(f"the phoneme vocabulary has ids beyond the model's {config['n_token']} tokens")
    return config


def _hop_size(graph: OnnxGraph, n_fft: int) -> int:
    """The iSTFT hop: the stride of the export's inverse-STFT transposed convolution."""
    for node in graph.nodes:
        if node.op == "ConvTranspose" and "stft" in node.name and node.attrs.get("strides"):
            return int(node.attrs["strides"][0])
    return n_fft // 4
