"""Draw docs/figures/problem.png: what BCE on W learns, and what fit_pue learns.

The data and the call are the README's first example; the curves run along the
first feature with the others at 0. Run from the repository root:
``.venv/bin/python docs/make_figure.py`` (about a minute on two cores).
"""

from __future__ import annotations

from pathlib import Path

import keras
import matplotlib
import numpy as np

import adpue_tf as adp

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402  (after choosing the backend)

OUT = Path(__file__).resolve().parent / "figures" / "problem.png"


def main() -> None:
    keras.utils.set_random_seed(0)
    s = adp.synthetic.synthetic_pue(2000, 2000, dim=4, seed=0)
    fit = adp.fit_pue(lambda: keras.Sequential([keras.Input((4,)), keras.layers.Dense(1)]),
                      s.x_pu, s.w_pu, s.x_e, s.e_e, epochs=10, verbose=0)
    t = np.linspace(-3, 3, 121)
    x = np.zeros((len(t), 4), np.float32)
    x[:, 0] = t
    sigmoid = lambda z: 1 / (1 + np.exp(-z))  # noqa: E731
    p = sigmoid(x @ s.y_weights + s.y_bias)
    theta = sigmoid(x @ s.e_weights + s.e_bias)

    def curve(model: keras.Model) -> np.ndarray:
        return sigmoid(model.predict(x, verbose=0).ravel())

    fig, ax = plt.subplots(figsize=(7, 3.6), dpi=120)
    ax.plot(t, p, "k-", lw=2.5, label="true p(y=1|x): what we want")
    ax.plot(t, theta, color="0.6", ls=":", label="θ(e=1|x): how often it is shown")
    ax.plot(t, p * theta, color="tab:red", ls="--", lw=1, label="q(w=1|x) = p·θ")
    ax.plot(t, curve(fit.candidates["bce_w"]), color="tab:red", lw=2,
            label="BCE on W: a fit of q, not p")
    ax.plot(t, curve(fit.model), color="tab:blue", lw=2,
            label=f"adp.fit_pue ({fit.choice}) learns p")
    ax.set_xlabel("first feature (the others at 0)")
    ax.set_ylabel("probability")
    ax.set_ylim(0, 1)
    ax.set_title("Shown-and-clicked is not liked: items rarely shown look like negatives")
    ax.legend(fontsize=8, loc="center left", frameon=False)
    fig.tight_layout()
    OUT.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(OUT)
    print(OUT)


if __name__ == "__main__":
    main()
