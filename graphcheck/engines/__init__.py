"""Engine adapters shipped with graphcheck, each registered under the ``graphcheck.engines`` entry points
and resolved by name without them too (``graphcheck.check.engines.SHIPPED``: a checkout run from PYTHONPATH).

* ``builtin-torch-cuda`` (:mod:`.torch_cuda`): the built-in engine capturing its graphs through
  ``torch.cuda``'s public API, as third-party engines do.
"""
