"""How confseq_reference.json was made (not run by the tests): the hedged-capital betting
confidence sequence of the reference package `confseq` 0.0.11 (Waudby-Smith & Ramdas), whose
pure-Python modules run without building its C++ parts:

    pip download --no-deps --no-binary :all: confseq==0.0.11   # then unpack it
    pip install "numpy<2" scipy matplotlib multiprocess   # it uses np.float_
    PYTHONPATH=confseq-0.0.11/src python make_confseq_reference.py > confseq_reference.json
"""

import json

import numpy as np
from confseq.betting import hedged_cs

rng = np.random.default_rng(2024)
population = rng.beta(2, 5, size=300)
cases = [
    {"name": "beta_iid", "alpha": 0.05, "N": None, "x": rng.beta(3, 2, size=200)},
    {
        "name": "three_point",
        "alpha": 0.05,
        "N": None,
        "x": rng.choice([0, 0.5, 1], 300, p=[0.1, 0.6, 0.3]),
    },
    {"name": "without_replacement", "alpha": 0.1, "N": 300, "x": rng.permutation(population)},
]
out = []
for case in cases:
    low, high = hedged_cs(
        case["x"], alpha=case["alpha"], N=case["N"], breaks=1000, running_intersection=True
    )
    out.append({**case, "x": case["x"].tolist(), "lower": low.tolist(), "upper": high.tolist()})
print(
    json.dumps(
        {
            "package": "confseq 0.0.11",
            "function": "confseq.betting.hedged_cs",
            "breaks": 1000,
            "cases": out,
        }
    )
)
