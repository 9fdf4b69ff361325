"""The models vLLM serves: a tiny Llama written to a folder, seeded from the scenario (no model hub).

vLLM loads models from a folder (config and safetensors). The CPU attention
needs a head size it has kernels for (64), so the width is fixed (two heads of
64, one KV head) whatever the scenario's ``hidden_size``; the vocabulary, the
length and the seed are the scenario's. Weights are drawn wider than the
default initialisation so that scores are spread and near ties rare. The draft
model of the ``draft_model`` method is the same folder: a drafter with the
target's weights proposes what the target would pick, so every draft is
accepted unless the scenario forces a rejection.
"""

from __future__ import annotations

import atexit
import shutil
import tempfile
import threading
from pathlib import Path
from typing import Any

LAYERS = 2
HEADS = 2
HEAD_SIZE = 64
INIT_STD = 0.3

_lock = threading.Lock()
_root: Path | None = None
_written: dict[tuple[int, int, int], Path] = {}


def model_folder(config: Any) -> Path:
    """The folder of ``config``'s model, written on first use in this process."""
    key = (int(config.vocab_size), int(config.model_seed) % 2**63, max(256, 2 * int(config.max_model_len)))
    with _lock:
        if key not in _written:
            folder = _folders() / f"llama-v{key[0]}-s{key[1]}-p{key[2]}"
            _write(folder, *key)
            _written[key] = folder
        return _written[key]


def _folders() -> Path:
    global _root
    if _root is None:
        _root = Path(tempfile.mkdtemp(prefix="graphcheck-vllm-models-"))
        atexit.register(shutil.rmtree, _root, ignore_errors=True)
    return _root


def _write(folder: Path, vocab: int, seed: int, positions: int) -> None:
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    hidden = HEADS * HEAD_SIZE
    hf_config = LlamaConfig(
        vocab_size=vocab,
        hidden_size=hidden,
        intermediate_size=2 * hidden,
        num_hidden_layers=LAYERS,
        num_attention_heads=HEADS,
        num_key_value_heads=1,
        head_dim=HEAD_SIZE,
        max_position_embeddings=positions,
        tie_word_embeddings=False,
        bos_token_id=None,
        eos_token_id=None,
        pad_token_id=None,
    )
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = LlamaForCausalLM(hf_config)
        with torch.no_grad():
            for p in model.parameters():
                p.normal_(0.0, INIT_STD)
    model.save_pretrained(folder)


__all__ = ["HEAD_SIZE", "model_folder"]
