"""How often the backend's two decoders (compact, generate) agree on greedy outputs, on the built-in model.

    python bench/decode_agreement.py   # CPU or CUDA
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "src"))


def main() -> None:
    from autorl.builtin.arith import Arith
    from autorl.inference.base import GenerationRequest
    from autorl.inference.hf import HFBackend
    from autorl.resources import resolve_model

    bench = Arith()
    model = resolve_model("autorl:tiny").path
    requests = [GenerationRequest(("Think. " * (i % 9)) + str(bench.config().render(item.input)), max_new_tokens=12,
                                  stop=("\n",))
                for i, item in enumerate(bench.load_items("test", Path(".")))]
    outputs = {}
    for mode in ("compact", "generate"):
        backend = HFBackend({"decode": mode})
        backend.load(model)
        outputs[mode] = [c.texts for c in backend.generate(requests)]
        device = backend.device
        backend.unload()
    same = sum(a == b for a, b in zip(outputs["compact"], outputs["generate"], strict=True))
    print(json.dumps({"device": device, "requests": len(requests), "identical": same}))


if __name__ == "__main__":
    main()
