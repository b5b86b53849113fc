"""Perplexity of each policy of `attnscope stream --json` files over the token ranges the
reproduction compares: within the context (predictions 1-255), beyond it (256 on) and the last
1,000 tokens; cache bytes at the end and ms per step. Prints JSON."""
import json
import math
import sys


def ppl(nll, a, b):
    part = nll[a:b]
    return round(math.exp(sum(part) / len(part)), 3) if part else None


out = []
for path in sys.argv[1:]:
    run = json.load(open(path))
    for p in run["policies"]:
        nll = p["nll"]
        out.append({"run": path.rsplit("/", 1)[-1], "spec": p["spec"], "tokens": p["tokens"],
                    "ppl_within_context": ppl(nll, 0, 255),
                    "ppl_beyond_context": ppl(nll, 256, len(nll)),
                    "ppl_last_1000": ppl(nll, len(nll) - 1000, len(nll)) if len(nll) > 1000 else None,
                    "final_cache_kib": round(p["final_bytes"] / 1024, 2),
                    "ms_per_step": round(p["step_seconds"] * 1e3, 4)})
json.dump(out, sys.stdout, indent=1)
print()
