"""``graphcheck catalog``: the detection benchmark, every injectable fault searched for until caught.

``run`` (the searches, per fault and for the clean engine), ``baseline`` (the
peer-style fixed tests beside it) and ``console`` (its table and progress lines).
"""
