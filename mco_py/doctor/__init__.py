"""``mco doctor``: checks of a running MCO, pure judgement (checks) over a probe of the host."""
