"""The model the adapter serves: a tiny transformers causal LM with random weights, seeded from the scenario.

No model hub is needed: the model is built from a config. ``sliding_window`` 0
gives a Llama-style model (full attention); a positive window gives a Mistral
config whose layers attend only that far back, which the engine serves with a
second kind of cache allocator and key length.
"""

from __future__ import annotations

from typing import Any

#: graphcheck's float models -> torch dtype names (the exact model is the built-in engine's alone).
DTYPES = {"float32": "float32", "bfloat16": "bfloat16"}
LAYERS = 2
HEADS = 2
#: Weights drawn wider than transformers' default (0.02), so that scores are spread and near ties rare.
INIT_RANGE = 0.3


def hidden_size_of(config: Any) -> int:
    """The model width: the scenario's hidden size rounded up to a multiple of 8 (two heads, even head size)."""
    return max(16, -(-int(config.hidden_size) // 8) * 8)


def build_model(config: Any, device: str, *, sliding_window: int = 0) -> Any:
    """A random-weight causal LM for ``config`` (its vocabulary, width, model seed and dtype) on ``device``."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM, MistralConfig, MistralForCausalLM

    hidden = hidden_size_of(config)
    common = dict(
        vocab_size=config.vocab_size,
        hidden_size=hidden,
        intermediate_size=2 * hidden,
        num_hidden_layers=LAYERS,
        num_attention_heads=HEADS,
        num_key_value_heads=1,
        head_dim=hidden // HEADS,
        max_position_embeddings=max(256, 2 * config.max_model_len),
        initializer_range=INIT_RANGE,
        tie_word_embeddings=False,
        bos_token_id=None,
        eos_token_id=None,
        pad_token_id=None,
    )
    if sliding_window > 0:
        hf_config, cls = MistralConfig(sliding_window=sliding_window, **common), MistralForCausalLM
    else:
        hf_config, cls = LlamaConfig(**common), LlamaForCausalLM
    hf_config._attn_implementation = "sdpa"
    dtype = getattr(torch, DTYPES[config.model])
    devices = [device] if device.startswith("cuda") else []
    with torch.random.fork_rng(devices=devices):
        torch.manual_seed(config.model_seed % 2**63)
        model = cls(hf_config)
    return model.to(device=device, dtype=dtype).eval()


__all__ = ["DTYPES", "build_model", "hidden_size_of"]
