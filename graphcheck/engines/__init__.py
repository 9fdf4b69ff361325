"""Engine adapters shipped with graphcheck, each registered under the ``graphcheck.engines`` entry points.

* ``builtin-torch-cuda`` (:mod:`.torch_cuda`): the built-in engine capturing its graphs through
  ``torch.cuda``'s public API, as third-party engines do.
"""
