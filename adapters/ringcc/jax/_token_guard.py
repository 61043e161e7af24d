"""The one place ringcc.jax reaches into JAX's internals, and why.

After a computation with ringcc's ordered effect fails on an asynchronous
device (a GPU: a mismatch between ranks, a bad root), JAX keeps the
computation's output token, which holds that error, as the input token of
the next computation with the same effect. Every later ringcc call would
then raise the first error again, while on the CPU (where the failure is
synchronous and no token is kept) the next call works. JAX offers no public
way to restart a token chain, so `guard_failed_tokens` wraps the method of
JAX's runtime token set that hands out input tokens: for ringcc's effect
only, a token that holds an error is dropped and the next call starts a
fresh chain. The failed call's own outputs still carry its error. JAX blocks
on the previous token before each such call anyway, so the check costs
nothing more. Where JAX's internals differ from what this expects, it does
nothing (and the first error repeats, as without it)."""

from __future__ import annotations


def guard_failed_tokens(effect) -> bool:
    """Installs the guard for `effect`; False where JAX's internals are not
    what it expects."""
    try:
        from jax._src import dispatch
    except ImportError:
        return False
    tokens = getattr(dispatch, "RuntimeTokenSet", None)
    get_token_input = getattr(tokens, "get_token_input", None)
    if get_token_input is None:
        return False
    guarded_effects = getattr(tokens, "_ringcc_guarded_effects", None)
    if guarded_effects is not None:
        guarded_effects.add(effect)
        return True
    guarded_effects = {effect}

    def guarded(self, eff, *args, **kwargs):
        current = getattr(self, "current_tokens", None)
        if eff in guarded_effects and isinstance(current, dict):
            token = current.get(eff)
            if token is not None and hasattr(token, "block_until_ready"):
                try:
                    token.block_until_ready()
                except Exception:  # the error reached the failed call's outputs
                    current.pop(eff, None)
        return get_token_input(self, eff, *args, **kwargs)

    tokens.get_token_input = guarded
    tokens._ringcc_guarded_effects = guarded_effects
    return True
