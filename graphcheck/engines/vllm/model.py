"""The models vLLM serves: a tiny Llama written to a folder, seeded from the scenario (no model hub).

vLLM loads models from a folder (config and safetensors). The CPU attention
needs a head size it has kernels for (64), so the width is fixed (two heads of
64, one KV head) whatever the scenario's ``hidden_size``; the vocabulary, the
length and the seed are the scenario's. Weights are drawn wider than the
default initialisation so that scores are spread and near ties rare. The draft
model of the ``draft_model`` method is the same folder: a drafter with the
target's weights proposes what the target would pick, so every draft is
accepted unless the scenario forces a rejection. The EAGLE heads
(:func:`head_folder`) are configs only: under those methods vLLM loads dummy
weights, which graphcheck draws by parameter name from the model's seed; their
drafts are a random head's, mostly rejected. The ``mtp`` method serves a MiMo
model instead (:func:`mtp_folder`), whose own next-token layer drafts.
"""

from __future__ import annotations

import atexit
import json
import shutil
import tempfile
import threading
import zlib
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
    key = (int(config.vocab_size), _seed_of(config), max(256, 2 * int(config.max_model_len)))
    with _lock:
        if key not in _written:
            folder = _folders() / f"llama-v{key[0]}-s{key[1]}-p{key[2]}"
            _write(folder, *key)
            _written[key] = folder
        return _written[key]


def head_folder(config: Any, method: str) -> Path:
    """The folder of a draft head for ``method`` (``eagle``, ``eagle3``): a config only, one layer of the
    target's width. Its weights, like the target's under these methods, are drawn by name at load
    (``runtime._seeded_weights``); EAGLE-3 reads the hidden states entering both target layers."""
    target = model_folder(config)
    with _lock:
        folder = target.with_name(f"{target.name}-{method}")
        if not folder.exists():
            settings = json.loads((target / "config.json").read_text())
            settings.update(num_hidden_layers=1, graphcheck_seed=_seed_of(config))
            if method == "eagle3":
                layers = list(range(LAYERS))
                settings.update(
                    eagle_aux_hidden_state_layer_ids=layers, eagle_config={"eagle_aux_hidden_state_layer_ids": layers}
                )
            folder.mkdir()
            (folder / "config.json").write_text(json.dumps(settings, indent=1))
        return folder


def mtp_folder(config: Any) -> Path:
    """The target of the ``mtp`` method: a MiMo model (Qwen2 layers and one next-token-prediction layer
    that vLLM's MTP proposer drafts with), a config only, its weights drawn by name at load."""
    target = model_folder(config)
    with _lock:
        folder = target.with_name(f"{target.name}-mimo-mtp")
        if not folder.exists():
            llama = json.loads((target / "config.json").read_text())
            shared = ("vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads")
            settings = {key: llama[key] for key in (*shared, "num_key_value_heads", "max_position_embeddings")}
            settings.update(
                model_type="qwen2",
                architectures=["MiMoForCausalLM"],
                num_nextn_predict_layers=1,
                tie_word_embeddings=False,
                graphcheck_seed=_seed_of(config),
            )
            folder.mkdir()
            (folder / "config.json").write_text(json.dumps(settings, indent=1))
        return folder


def seeded_values(torch: Any, seed: int, name: str, shape: tuple[int, ...]) -> Any:
    """float32 values of a parameter: normal, ``INIT_STD`` wide, from a generator seeded by ``seed`` and
    the parameter's name."""
    generator = torch.Generator().manual_seed((seed * 1_000_003 + zlib.crc32(name.encode())) % 2**63)
    return torch.randn(shape, generator=generator, dtype=torch.float32) * INIT_STD


def _seed_of(config: Any) -> int:
    return int(config.model_seed) % 2**63


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
    settings = json.loads((folder / "config.json").read_text())
    settings["graphcheck_seed"] = seed  # what the seeded load of a draft-head method draws the weights from
    (folder / "config.json").write_text(json.dumps(settings, indent=1))


__all__ = ["HEAD_SIZE", "head_folder", "model_folder", "mtp_folder", "seeded_values"]
