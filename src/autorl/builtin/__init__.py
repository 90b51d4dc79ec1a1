"""What autorl ships built in, so that a run works offline on a fresh machine: the ``arith`` demo benchmark, the
``basics`` off-target set and the ``autorl:tiny`` model's recipe. They need only the contracts; the built-in
plugins (:mod:`autorl.default_plugins`) register them, and :mod:`autorl.resources` builds the model."""
