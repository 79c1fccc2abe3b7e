"""The experiments wing: reproducing and benchmarking the paper.

Nothing here is needed to train or serve a model; the library core
(:mod:`adpue_tf`) never imports this package. Modules:

* :mod:`~adpue_tf.experiments.simulate`: the paper's exposure mechanism and splits.
* :mod:`~adpue_tf.experiments.datasets`: LIBSVM, Fashion-MNIST, MNIST/CIFAR-10 loaders.
* :mod:`~adpue_tf.experiments.baselines`: SAR-EM and the Ratio estimator.
* :mod:`~adpue_tf.experiments.linear_fit`: many linear models fitted at once.
* :mod:`~adpue_tf.experiments.table1`, :mod:`~adpue_tf.experiments.table2`: the
  paper's Table 1 (linear) and Table 2 (neural) settings.
* :mod:`~adpue_tf.experiments.bench`: runs the tables and writes ``benchmarks/results``.
* :mod:`~adpue_tf.experiments.demo`: ``adpue-tf demo``.
* :mod:`~adpue_tf.experiments.published`: the paper's own numbers.
* :mod:`~adpue_tf.experiments.report`, :mod:`~adpue_tf.experiments.progress`:
  Markdown tables and a progress line.
* :mod:`~adpue_tf.experiments.reuse`: :func:`keep_compiled`, a loop of fit_pue
  calls that traces each training step once.
"""

from adpue_tf.experiments.reuse import keep_compiled

__all__ = ["keep_compiled"]
