"""Means over windows of each variant's trade-off point (attnscope analyze --json)."""
import json
import sys

out, windows = sys.argv[1], int(sys.argv[2])
rows = {}
tokens = 0
for w in range(windows):
    d = json.load(open("%s/window_%d.json" % (out, w)))
    tokens += len(d["input"]["ids"])
    for p in d["tradeoff"]:
        r = rows.setdefault(p["spec"], {"density": 0.0, "next_token_kl": 0.0,
                                        "top1_agreement": 0.0, "perplexity": 0.0})
        for k in r:
            r[k] += p[k] / windows
summary = {"windows": windows, "tokens": tokens, "variants": rows}
print(json.dumps(summary, indent=1))
