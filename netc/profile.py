"""Prediction beside measurement: `netc run NET.so --profile` and `netc explain --profile`.

`netc run NET.so --profile` times every part of a forward with CUDA events (netc_profile through
Net.profile: the input copies, each kernel launch, the output copies; median and min of --repeat
runs) and puts beside each launch what Paleo's roofline model predicts for it on the cost model's
device: costmodel.layer_time(device, FLOPs, bytes) with the launch's forward FLOPs and bytes from
the manifest (the same per-layer numbers `netc explain` shows; at a call batch b below the
compiled batch B both are scaled by b/B). Per op type of the launches' first layers (conv2d,
inner_product, maxpool, ...) the efficiency factor is

    factor = sum of predicted times / sum of measured times        (1.0: as fast as the model)

and --profile-out writes all of it as JSON. `netc explain --device D --profile PROF.json` reads
those factors back (read_profile) and divides each layer's modeled time by its op type's factor.
"""
from __future__ import annotations

import datetime
import json
import math
import os
import sys

from .diagnostics import SOURCES, Loc, NetcError

# torch's device name -> the cost model's device (the first pattern found in the name, upper case)
DEVICE_PATTERNS = (("H100", "h100"), ("H200", "h200"), ("A100", "a100"))
LAYERS_SHOWN = 32        # characters of the layers column


def costmodel_device(spec: str | None, torch_name: str | None) -> str:
    """The cost model's device key: --device as given, else from torch's device name."""
    from .costmodel import get_device
    if spec:
        get_device(spec)           # an unknown name is an error now, not after the runs
        return spec
    if torch_name is None:
        raise NetcError("--profile predicts every launch's time with the cost model of a device, and torch sees "
                        "no CUDA device to name it: give --device (h100, h200, a100, ... or "
                        "custom:PEAK_FLOPS,BANDWIDTH)")
    for pattern, key in DEVICE_PATTERNS:
        if pattern in torch_name.upper():
            return key
    raise NetcError(f"--profile: the cost model has no device for '{torch_name}': give --device (h100, h200, "
                    f"a100, ... or custom:PEAK_FLOPS,BANDWIDTH, e.g. custom:82.6T,1.0T)")


def op_type(op: str | None) -> str | None:
    """'netc.conv2d' -> 'conv2d' (the op type explain's rows name)."""
    return op.split(".", 1)[1] if op and op.startswith("netc.") else op


def predict(prof: dict, device_key: str) -> dict:
    """The profile document: Net.profile's rows with their prediction (flops and bytes scaled to
    the call batch), totals, and the efficiency factor per op type."""
    from .version import __version__
    from .costmodel import get_device, layer_time
    dev = get_device(device_key)
    scale = prof["batch"] / prof["compiled_batch"]
    rows = []
    for p in prof["rows"]:
        flops, nbytes = p["flops"] * scale, p["bytes"] * scale
        pred = layer_time(dev, flops, nbytes) * 1e3
        meas = p["median_ms"]
        rows.append(dict(p, op_type=op_type(p["op"]), flops=flops, bytes=nbytes, predicted_ms=pred,
                         ratio=meas / pred if pred > 0 else None,
                         tflops=flops / (meas * 1e-3) / 1e12 if meas > 0 else None,
                         gbps=nbytes / (meas * 1e-3) / 1e9 if meas > 0 else None))
    launches = [r for r in rows if r["kind"] == "launch"]
    types: dict = {}
    for r in launches:
        t = types.setdefault(r["op_type"] or "?", dict(launches=0, measured_ms=0.0, predicted_ms=0.0))
        t["launches"] += 1
        t["measured_ms"] += r["median_ms"]
        t["predicted_ms"] += r["predicted_ms"]
    for t in types.values():
        t["factor"] = t["predicted_ms"] / t["measured_ms"] if t["measured_ms"] > 0 else None
    copies = {r["kind"]: r["median_ms"] for r in rows if r["kind"] != "launch"}
    lm, lp = sum(r["median_ms"] for r in launches), sum(r["predicted_ms"] for r in launches)
    totals = dict(launches=len(launches), launches_ms=lm, launches_min_ms=sum(r["min_ms"] for r in launches),
                  predicted_ms=lp, ratio=lm / lp if lp > 0 else None, input_copy_ms=copies.get("input copy", 0.0),
                  output_copy_ms=copies.get("output copy", 0.0), total_ms=sum(r["median_ms"] for r in rows))
    return dict(netc=__version__, date=datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
                network=prof["network"], library=prof["library"], device_name=prof["device_name"],
                costmodel_device=device_key, costmodel_device_name=dev.name, batch=prof["batch"],
                compiled_batch=prof["compiled_batch"], scale=scale, repeat=prof["repeat"], warmup=prof["warmup"],
                rows=rows, totals=totals, op_types=types,
                factors={k: v["factor"] for k, v in types.items() if v["factor"] is not None})


def _layers(names: list) -> str:
    """The layers column: the names joined, cut to LAYERS_SHOWN characters ("..(+N)": N more)."""
    names = [n for n in names if n]
    text = ",".join(names)
    if len(text) <= LAYERS_SHOWN:
        return text
    for k in range(len(names) - 1, 0, -1):
        cut = ",".join(names[:k]) + f",..(+{len(names) - k})"
        if len(cut) <= LAYERS_SHOWN:
            return cut
    rest = f"..(+{len(names) - 1})" if len(names) > 1 else ".."
    return names[0][:LAYERS_SHOWN - len(rest)] + rest


def _us(ms: float) -> str:
    us = ms * 1e3
    return f"{us:.1f}" if us >= 100 else f"{us:.2f}" if us >= 1 else f"{us:.4f}"


def _ratio(x) -> str:
    return _f(x, ".2f" if x is None or x < 1000 else ".0f")


def _f(x, spec: str) -> str:
    return "-" if x is None else format(x, spec)


def report(doc: dict) -> str:
    """The text table of `netc run NET.so --profile`."""
    dev = f"{doc['costmodel_device_name']} ({doc['costmodel_device']})"
    of = "" if doc["batch"] == doc["compiled_batch"] else f" of {doc['compiled_batch']}"
    out = [f"profile of {doc['network']} ({os.path.basename(doc['library'])}) at batch {doc['batch']}{of} on "
           f"{doc['device_name'] or 'the device'}: median of {doc['repeat']} runs after {doc['warmup']} warm-up runs "
           f"(CUDA events); predicted by Paleo's roofline model of {dev} at 100% of peak"]
    if doc["batch"] != doc["compiled_batch"]:
        out.append(f"note: compiled for batch {doc['compiled_batch']}, run at {doc['batch']}: every launch's FLOPs and "
                   f"bytes are scaled by b/B = {doc['batch']}/{doc['compiled_batch']} for the prediction")
    head = ("step", "kernel", "layers", "measured us", "min us", "predicted us", "meas/pred", "TFLOP/s", "GB/s")
    body = []
    for r in doc["rows"]:
        kernel = r["kernel"] or f"({r['kind']})"
        step = "-" if r["step"] is None else str(r["step"])
        body.append((step, kernel, _layers(r["layers"]), _us(r["median_ms"]), _us(r["min_ms"]),
                     _us(r["predicted_ms"]), _ratio(r["ratio"]), _f(r["tflops"], ".3f"), _f(r["gbps"], ".1f")))
    out += _table(head, body, left={1, 2})
    t = doc["totals"]
    out.append(f"launches: {t['launches']}, measured {_us(t['launches_ms'])} us (sum of medians; of minima "
               f"{_us(t['launches_min_ms'])}), predicted {_us(t['predicted_ms'])} us, measured/predicted "
               f"{_ratio(t['ratio'])}")
    out.append(f"copies: inputs {_us(t['input_copy_ms'])} us, outputs {_us(t['output_copy_ms'])} us; "
               f"total {_us(t['total_ms'])} us (launches and copies)")
    out.append("")
    out.append("efficiency per op type (sum of predicted / sum of measured; netc explain --profile applies it):")
    tb = [(k, str(v["launches"]), _us(v["measured_ms"]), _us(v["predicted_ms"]),
           _f(v["factor"], ".4g")) for k, v in sorted(doc["op_types"].items(), key=lambda kv: -kv[1]["measured_ms"])]
    out += _table(("op type", "launches", "measured us", "predicted us", "efficiency"), tb, left={0})
    return "\n".join(out) + "\n"


def _table(head, body, left) -> list:
    w = [max(len(x[i]) for x in [head] + body) for i in range(len(head))]

    def fmt(cells):
        return "  ".join(c.ljust(w[i]) if i in left else c.rjust(w[i]) for i, c in enumerate(cells)).rstrip()
    return [fmt(head), "  ".join("-" * x for x in w)] + [fmt(b) for b in body]


def run_profile(args) -> int:
    """`netc run NET.so --profile [--repeat N] [--device DEV] [--profile-out PROF.json]`."""
    from .runtime.native import device_name, profile_cli
    key = costmodel_device(args.device, device_name())
    if args.profile_out:
        _writable(args.profile_out)
    doc = predict(profile_cli(args, repeat=args.repeat or 20), key)
    sys.stdout.write(report(doc))
    if args.profile_out:
        try:
            with open(args.profile_out, "w") as f:
                json.dump(doc, f, indent=1)
                f.write("\n")
        except OSError as e:
            raise NetcError(f"cannot write '{args.profile_out}': {e.strerror or e}") from None
        sys.stderr.write(f"wrote {args.profile_out}\n")
    return 0


def _writable(path: str) -> None:
    d = os.path.dirname(os.path.abspath(path))
    if os.path.isdir(path) or not os.path.isdir(d):
        raise NetcError(f"cannot write the profile to '{path}': " + ("it is a directory" if os.path.isdir(path)
                                                                      else f"no directory '{d}'"))


def read_profile(path: str) -> dict:
    """The calibration in a profile written by `netc run NET.so --profile --profile-out`: {"file",
    "device" (the cost model's), "device_name" (torch's), "factors" {op type: factor}}. Only
    `costmodel_device` and `factors` are required, so a hand-written profile works too."""
    hint = f"(netc run NET.so --profile --profile-out {path} writes one)"
    try:
        with open(path, "rb") as f:
            raw = f.read()
    except OSError as e:
        raise NetcError(f"cannot read the profile '{path}': {e.strerror or e} {hint}") from None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise NetcError(f"'{path}' is not a profile: not UTF-8 text {hint}", Loc(path)) from None
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as e:
        SOURCES.add(path, text)
        raise NetcError(f"invalid JSON in the profile: {e.msg}", Loc(path, e.lineno, e.colno)) from None
    if not isinstance(doc, dict) or not isinstance(doc.get("factors"), dict):
        raise NetcError(f"'{path}' is not a netc profile: it has no \"factors\" object (op type -> efficiency) "
                        f"{hint}", Loc(path))
    dev = doc.get("costmodel_device")
    if not isinstance(dev, str) or not dev:
        raise NetcError(f"'{path}' is not a netc profile: it has no \"costmodel_device\" (the cost model's device "
                        f"it was predicted with, e.g. \"h100\") {hint}", Loc(path))
    bad = [f"'{k}': {json.dumps(v)}" for k, v in doc["factors"].items()
           if isinstance(v, bool) or not isinstance(v, (int, float)) or not (math.isfinite(v) and v > 0)]
    if bad:
        raise NetcError(f"'{path}': an efficiency factor must be a positive number; got {', '.join(bad)}", Loc(path))
    name = doc.get("device_name")
    return {"file": path, "device": dev, "device_name": name if isinstance(name, str) else None,
            "factors": {k: float(v) for k, v in doc["factors"].items()}}
