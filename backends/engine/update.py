"""Status update and the draft proposer's bookkeeping, batched over slots.

* ``update_model_status``: decoding-semantics §4.1 (re-scan eos / max_dec_len, step_idx,
  lengths, stop flags, token history, next input token) with NAIVE's §4.3
  ``seq_lens_this_time`` rule folded in.
* ``draft_preprocess`` / ``draft_update`` / ``draft_postprocess``: §5.1, §5.4,
  §5.5 reshaped for README §5.5 (the draft rebuilds its state from the target
  every step; no rollback state).

Every kernel touches only the slots of [0, G) that ran this step; free slots and
padded slots keep their idle values.
"""

from __future__ import annotations

from graphcheck.backends.engine.sampling import running_mask
from graphcheck.backends.engine.verify import eos_scan
from graphcheck.capture.kernels import kernel


@kernel
def update_model_status(xp, buf, num_slots: int, naive: bool) -> None:
    G = num_slots
    K1 = int(buf.accept_tokens.shape[1])
    max_len = int(buf.token_ids_all.shape[1])
    rows = slice(0, G)
    running = running_mask(xp, buf, G)
    step_idx = buf.step_idx[:G]
    enc, dec = buf.seq_lens_encoder[:G], buf.seq_lens_decoder[:G]
    tokens, count, stopped = eos_scan(
        xp, buf.accept_tokens[:G], buf.accept_num[:G], step_idx, buf.max_dec_len[:G], buf.eos_ids[:G]
    )
    new_dec = dec + xp.where(xp.gt(enc, 0), enc, count)  # prefill folds the prompt in

    # Token history: generated token j sits at prompt_len + j.
    base = buf.prompt_lens[:G] + step_idx
    cols = xp.reshape(xp.arange(max_len), (1, max_len))
    offset = cols - xp.unsqueeze(base, 1)
    write = xp.logical_and(xp.ge(offset, 0), xp.lt(offset, xp.unsqueeze(count, 1)))
    write = xp.logical_and(write, xp.unsqueeze(running, 1))
    xp.masked_assign_(buf.token_ids_all, rows, write, xp.gather(tokens, xp.clip(offset, 0, K1 - 1), 1))

    # The last emitted token is the next step's input token 0.
    last = xp.reshape(xp.gather(tokens, xp.reshape(xp.clip(count - 1, 0, K1 - 1), (G, 1)), 1), (G,))
    xp.masked_assign_(buf.draft_tokens, (rows, 0), xp.logical_and(running, xp.gt(count, 0)), last)
    xp.masked_assign_(buf.accept_tokens, rows, running, tokens)
    xp.masked_assign_(buf.accept_num, rows, running, count)
    xp.masked_assign_(buf.step_idx, rows, running, step_idx + count)
    xp.masked_assign_(buf.seq_lens_decoder, rows, running, new_dec)
    xp.masked_assign_(buf.seq_lens_encoder, rows, running, 0)
    if naive:  # no proposer: the next step feeds exactly the last token
        xp.masked_assign_(buf.seq_lens_this_time, rows, running, xp.where(stopped, 0, 1))
    xp.masked_assign_(buf.stop_flags, rows, xp.logical_and(running, stopped), True)


@kernel
def draft_preprocess(xp, buf, num_slots: int, num_model_steps: int) -> None:
    """Decide who drafts and set up substep 0 (README §5.5, decoding-semantics §5.1).

    For each slot that ran (``seq_lens_this_time > 0``): clear its drafts; it
    skips when it stopped or ``step_idx + S >= max_dec_len``. Otherwise
    substep 0 covers the committed draft positions not yet written:
    ``[seq_lens_decoder - n, seq_lens_decoder)`` with ``n`` = the prompt length
    on the draft's prefill, else ``accept_num``.
    """
    G, S = num_slots, num_model_steps
    rows = slice(0, G)
    ran = xp.gt(buf.seq_lens_this_time[:G], 0)
    skip = xp.logical_or(buf.stop_flags[:G], xp.ge(buf.step_idx[:G] + S, buf.max_dec_len[:G]))
    active = xp.logical_and(ran, xp.logical_not(skip))
    d_enc = buf.draft_seq_lens_encoder[:G]
    count = xp.where(active, xp.where(xp.gt(d_enc, 0), d_enc, buf.accept_num[:G]), 0)
    xp.masked_assign_(buf.draft_seq_lens_this_time, rows, ran, count)
    xp.masked_assign_(buf.draft_seq_lens_decoder, rows, active, buf.seq_lens_decoder[:G] - count)
    xp.masked_assign_(buf.draft_seq_lens_encoder, rows, ran, 0)
    xp.masked_assign_(buf.draft_tokens, (rows, slice(1, None)), ran, -1)


@kernel
def draft_update(xp, buf, last_hidden, proposals, margins, runners_up, num_slots: int, substep: int) -> None:
    """After substep s: record the proposal as draft ``s+1`` (and its margin and runner-up, for
    the model report) and set up substep s+1 (1 token)."""
    G = num_slots
    rows = slice(0, G)
    n = buf.draft_seq_lens_this_time[:G]
    active = xp.gt(n, 0)
    xp.masked_assign_(buf.draft_seq_lens_decoder, rows, active, buf.draft_seq_lens_decoder[:G] + n)
    xp.masked_assign_(buf.draft_input_tokens, rows, active, proposals[:G])
    xp.masked_assign_(buf.draft_last_hidden, rows, active, last_hidden[:G])
    xp.masked_assign_(buf.draft_tokens, (rows, substep + 1), active, proposals[:G])
    xp.masked_assign_(buf.draft_margins, (rows, substep), active, margins[:G])
    xp.masked_assign_(buf.draft_runners_up, (rows, substep), active, runners_up[:G])
    xp.assign_(buf.draft_seq_lens_this_time, rows, xp.astype(active, xp.int64))  # 1 token per active slot


@kernel
def draft_postprocess(xp, buf, num_slots: int, num_model_steps: int) -> None:
    """Next step's target token count per slot (decoding-semantics §5.5): 1 + drafts, 0 when stopped."""
    G = num_slots
    rows = slice(0, G)
    ran = xp.gt(buf.seq_lens_this_time[:G], 0)
    drafted = xp.gt(buf.draft_seq_lens_this_time[:G], 0)
    nxt = xp.where(buf.stop_flags[:G], 0, xp.where(drafted, 1 + num_model_steps, 1))
    xp.masked_assign_(buf.seq_lens_this_time, rows, ran, nxt)
    # The draft's per-substep count is spent: leave it idle for the next step.
    xp.masked_assign_(buf.draft_seq_lens_this_time, rows, ran, 0)
