"""Draft verification (decoding-semantics §3.2 with the README §5.3 choices), batched over slots.

For slot b with n input tokens, drafts ``d_1..d_{n-1}`` sit in
``draft_tokens[b, 1:n]`` and target rows ``cu_out[b] + i``. Phase 1 accepts the
leading drafts (override ``i < A`` > accept_all > strategy), phase 2 emits the
strategy's token of the first rejected row, and the emit rule (eos stops;
``step_idx >= max_dec_len`` turns the token into ``eos[0]`` and stops) cuts the
run at the first stop. Only running slots are written.
"""

from __future__ import annotations

from dataclasses import dataclass

from graphcheck.backends.engine.sampling import first_true, running_mask
from graphcheck.capture.kernels import kernel
from graphcheck.contract import ACCEPT_ALL_EOS_STANDIN


def eos_scan(xp, tokens, count, step_idx, max_dec_len, eos_ids, cols=None):
    """Apply the emit rule to ``tokens[:, :count]``.

    Returns ``(tokens, count, stopped)``: the run ends at the first token that is
    an eos or reaches ``max_dec_len`` (that token becomes ``eos[0]`` unless it is
    an eos); tokens past the end become -1. ``cols``: ``arange(K1)`` as a ``[1, K1]``
    row, where the caller already has one.
    """
    K1 = int(tokens.shape[1])
    if cols is None:
        cols = xp.reshape(xp.arange(K1), (1, K1))
    inside = xp.lt(cols, xp.unsqueeze(count, 1))
    is_eos = xp.any(xp.eq(xp.unsqueeze(tokens, 2), xp.unsqueeze(eos_ids, 1)), -1)
    is_eos = xp.logical_and(inside, is_eos)
    limit = xp.ge(xp.unsqueeze(step_idx, 1) + cols + 1, xp.unsqueeze(max_dec_len, 1))
    stop_here = xp.logical_and(inside, xp.logical_or(is_eos, limit))
    first = first_true(xp, stop_here, K1, cols)
    stopped = xp.lt(first, K1)
    count = xp.where(stopped, first + 1, count)
    at_stop = xp.eq(cols, xp.unsqueeze(first, 1))
    replace = xp.logical_and(at_stop, xp.logical_not(is_eos))
    tokens = xp.where(replace, xp.unsqueeze(eos_ids[:, 0], 1), tokens)
    tokens = xp.where(xp.lt(cols, xp.unsqueeze(count, 1)), tokens, -1)
    return tokens, count, stopped


def _rows_of(xp, values, index):
    """``values[index]`` for an int64 index tensor of any shape (first axis gather)."""
    flat = xp.index_select(values, xp.reshape(index, (-1,)), 0)
    return xp.reshape(flat, tuple(index.shape) + tuple(values.shape[1:]))


@dataclass(frozen=True)
class VerifyOptions:
    """How :func:`verify_drafts` decides (fixed per engine, but for the reasoning-rule fault).

    ``use_candidates``: compare drafts with the TOPP candidates (``cand_ids`` / ``cand_len``)
    rather than with the rows' tokens. ``accept_policy``: the config's (``normal``,
    ``accept_all``, ``reject_all``). ``reasoning_rule`` is False only under the
    reasoning-rule-skipped-in-graph fault: reasoning_status 1 then no longer rejects the
    drafts. ``verify_window``: the contract's TOPP verify window (0: off; see
    :func:`_window_walk`); ``window_stored``: its ``window_second`` ``stored`` (a
    one-candidate row's second candidate reads 0). ``accept_all_guard``: the contract's
    ``accept_all_eos`` ``replace``: under accept_all an eos draft (not one an override
    accepts) is emitted as ``ACCEPT_ALL_EOS_STANDIN``.
    """

    use_candidates: bool = False
    accept_policy: str = "normal"
    reasoning_rule: bool = True
    verify_window: int = 0
    window_stored: bool = False
    accept_all_guard: bool = False


@kernel
def verify_drafts(xp, buf, tokens, cand_ids, cand_len, num_slots: int, options: VerifyOptions) -> None:
    """Write ``accept_tokens`` / ``accept_num`` of the running slots of [0, G).

    ``tokens`` [rows]: the strategy's phase-2 token per output row (greedy,
    sample or topp_sample). ``cand_ids`` / ``cand_len``: TOPP candidates (when
    ``options.use_candidates``), else unused.
    """
    G = num_slots
    K1 = int(buf.draft_tokens.shape[1])
    rows = int(tokens.shape[0])
    running = running_mask(xp, buf, G)
    n = buf.seq_lens_this_time[:G]
    cols = xp.reshape(xp.arange(K1), (1, K1))
    row = xp.clip(xp.unsqueeze(buf.cu_seqlens_out[:G], 1) + cols, 0, rows - 1)  # [G, K1]
    row_token = _rows_of(xp, tokens, row)

    drafts = xp.concat([buf.draft_tokens[:G, 1:], xp.full((G, 1), -1, xp.int64)], 1)  # d_{i+1}
    if options.use_candidates:
        cands = _rows_of(xp, cand_ids, row)  # [G, K1, C]
        lens = _rows_of(xp, cand_len, row)  # [G, K1]
        C = int(cand_ids.shape[1])
        in_len = xp.lt(xp.reshape(xp.arange(C), (1, 1, C)), xp.unsqueeze(lens, 2))
        match = xp.any(xp.logical_and(xp.eq(cands, xp.unsqueeze(drafts, 2)), in_len), -1)
    else:
        match = xp.eq(drafts, row_token)
    if options.accept_policy == "accept_all":
        match = xp.full((G, K1), True, xp.bool)
    override = xp.unsqueeze(buf.accept_override[:G], 1)
    decision = xp.where(xp.ge(override, 0), xp.lt(cols, override), match)

    phase1 = xp.eq(buf.seq_lens_encoder[:G], 0)
    if options.reasoning_rule:
        phase1 = xp.logical_and(phase1, xp.ne(buf.reasoning_status[:G], 1))
    if options.accept_policy == "reject_all":
        phase1 = xp.full((G,), False, xp.bool)
    has_draft = xp.lt(cols, xp.unsqueeze(n, 1) - 1)
    accept = xp.logical_and(xp.logical_and(has_draft, xp.unsqueeze(phase1, 1)), decision)
    if options.use_candidates and options.verify_window > 0 and options.accept_policy == "normal":
        stored_lens = lens if options.window_stored else None
        window = _window_starts(xp, cands, drafts, has_draft, options.verify_window, stored_lens)
        window = xp.logical_and(xp.logical_and(window, xp.unsqueeze(phase1, 1)), xp.lt(override, 0))
        accepted = _window_walk(xp, accept, window, options.verify_window)
    else:
        accepted = first_true(xp, xp.logical_not(accept), K1, cols)  # leading accepted drafts

    bonus = xp.reshape(xp.gather(row_token, xp.reshape(xp.clip(accepted, 0, K1 - 1), (G, 1)), 1), (G, 1))
    a2 = xp.unsqueeze(accepted, 1)
    if options.accept_all_guard and options.accept_policy == "accept_all":
        drafts = _guard_eos_drafts(xp, drafts, buf.eos_ids[:G], xp.lt(override, 0))
    emitted = xp.where(xp.lt(cols, a2), drafts, xp.where(xp.eq(cols, a2), bonus, -1))
    out, count, _ = eos_scan(xp, emitted, accepted + 1, buf.step_idx[:G], buf.max_dec_len[:G], buf.eos_ids[:G], cols)
    xp.masked_assign_(buf.accept_tokens, slice(0, G), running, out)
    xp.masked_assign_(buf.accept_num, slice(0, G), running, count)


def _shift_left(xp, x, by: int, fill):
    """``x[:, by:]`` padded back to ``x``'s width with ``fill`` (column i then holds column i + by)."""
    G, K1 = int(x.shape[0]), int(x.shape[1])
    if by >= K1:
        return xp.full((G, K1), fill, x.dtype)
    return xp.concat([x[:, by:], xp.full((G, by), fill, x.dtype)], 1)


def _guard_eos_drafts(xp, drafts, eos_ids, unforced):
    """``drafts`` [G, K1] with each eos id of its slot (``eos_ids`` [G, E], -1 padded) replaced by
    ``ACCEPT_ALL_EOS_STANDIN`` in the slots ``unforced`` [G, 1] marks (no accept override)."""
    is_eos = xp.any(xp.eq(xp.unsqueeze(drafts, 2), xp.unsqueeze(eos_ids, 1)), -1)
    is_eos = xp.logical_and(xp.logical_and(is_eos, xp.ge(drafts, 0)), unforced)
    return xp.where(is_eos, ACCEPT_ALL_EOS_STANDIN, drafts)


def _window_starts(xp, cands, drafts, has_draft, w: int, lens=None):
    """[G, K1] bool: the verify window holds at column i (``reference.verify._window_holds``).

    Draft i equals its row's second-ranked candidate, and each draft i + j (j = 1..w, all of
    them drafts of the slot) equals row i + j's first-ranked one. ``cands`` [G, K1, C] hold
    each row's candidates in rank order, whatever the accepted length; with ``lens`` [G, K1]
    (``window_second`` ``stored``) a row of one candidate has second candidate 0.
    """
    C = int(cands.shape[2])
    if C < 2:
        return xp.full(tuple(drafts.shape), False, xp.bool)
    top = cands[:, :, 0]
    second = cands[:, :, 1] if lens is None else xp.where(xp.eq(lens, 1), 0, cands[:, :, 1])
    holds = xp.logical_and(xp.eq(drafts, second), _shift_left(xp, has_draft, w, False))
    for j in range(1, w + 1):
        holds = xp.logical_and(holds, xp.eq(_shift_left(xp, drafts, j, -1), _shift_left(xp, top, j, -2)))
    return holds


def _window_walk(xp, accept, window, w: int):
    """Leading accepted drafts of a phase-1 walk with the verify window, per slot [G].

    From column 0, a column whose draft is accepted moves the walk on by one; else one where
    the window holds moves it on by ``w + 1`` (that draft and the next w, all accepted); else
    the walk stops. Unrolled over the K1 columns (every move covers at one column at least),
    so the shapes stay static.
    """
    G, K1 = int(accept.shape[0]), int(accept.shape[1])
    accept, window = xp.astype(accept, xp.int64), xp.astype(window, xp.int64)  # paddle gathers no bools
    pos = xp.zeros((G,), xp.int64)
    going = xp.full((G,), True, xp.bool)
    for _ in range(K1):
        at = xp.reshape(xp.clip(pos, 0, K1 - 1), (G, 1))
        inside = xp.lt(pos, K1)
        one = xp.logical_and(inside, xp.gt(xp.reshape(xp.gather(accept, at, 1), (G,)), 0))
        jump = xp.logical_and(inside, xp.gt(xp.reshape(xp.gather(window, at, 1), (G,)), 0))
        move = xp.where(one, 1, xp.where(jump, w + 1, 0))
        move = xp.where(going, move, 0)
        going = xp.logical_and(going, xp.gt(move, 0))
        pos = pos + move
    return pos
