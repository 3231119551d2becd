"""paddle.evaluator: PaddlePaddle v2's evaluators (trainer_config_helpers' *_evaluator, the C++ ones of
paddle/gserver/evaluators/Evaluator.{h,cpp}), computed by netc.v2 from the values of each batch.

    classification_error(input, label, name, weight, top_k)   the (weighted) fraction of samples whose
                                        label is not among the top_k (1) scores of `input`
    auc(input, label, name, weight)     the area under the ROC curve of the last column of `input`
                                        against labels (0 negative, else positive), over PaddlePaddle's
                                        2^24 - 1 bins of the score (a score in [0, 1]), trapezoids
    precision_recall(input, label, positive_label, name, weight)
                                        per class TP/FP/FN by the argmax of `input`; with positive_label:
                                        '<name>.precision', '<name>.recal' (PaddlePaddle's spelling),
                                        '<name>.F1-score' of that class; without: the macro averages
                                        '<name>.macro-average-precision', '-recall', '-F1-score' and
                                        '<name>.micro-average-precision'
    sum(input, name, weight)            the (weighted) sum of `input` (or of its ids) per sample

An evaluator is named `__<kind>_evaluator_<n>__` unless given a name (PaddlePaddle's default names), and
reports under that name in the events' `metrics` as PaddlePaddle's do: EndIteration's over its batch,
EndPass's over the pass, trainer.test's TestResult over the test. It joins every trainer.SGD made after
it whose topology (cost and extra_layers) holds the layers it reads, as PaddlePaddle's parse_network
keeps them -- its input may also be computed from the topology's layers alone (a Softmax fc's
probabilities, which netc's cost reads as logits, where PaddlePaddle's cost reads them): it is then
added as an extra output. A weight data layer read by nothing else goes in extra_layers. precision=1 and recall=1 where a
class has no prediction / no sample, as PaddlePaddle's.
Not yet: a dense (multi-binary) label, classification_error's threshold, chunk, ctc_error, pnpair,
column_sum and the printers."""
from __future__ import annotations

import itertools

import numpy as np

from ..api.core import Layer
from ..api.errors import error, user_loc
from .names import missing_names

REGISTERED: list = []                       # every evaluator made, in order
_COUNTERS: dict = {}
BINS = (1 << 24) - 1                        # AucEvaluator's kBinNum_


def _name(kind, name):
    if name is not None:
        return str(name)
    return f"__{kind}_evaluator_{next(_COUNTERS.setdefault(kind, itertools.count()))}__"


def _layer(x, what, role, loc):
    if not isinstance(x, Layer):
        raise error(f"paddle.evaluator.{what}: {role} is a paddle.layer layer, got {type(x).__name__}", loc)
    return x


def _rows(values, layer, n) -> np.ndarray:
    return values[layer.name].detach().cpu().double().numpy().reshape(n, -1)


class Evaluator:
    """One evaluator: what it reads (input, label, weight layers) and how its statistics grow."""
    kind = ""

    def __init__(self, input, label, weight, name, loc):  # noqa: A002
        self.input = _layer(input, self.kind, "input", loc)
        self.label = None if label is None else _layer(label, self.kind, "label", loc)
        self.weight = None if weight is None else _layer(weight, self.kind, "weight", loc)
        self.check(loc)
        self.name, self.loc = _name(self.kind, name), loc
        REGISTERED.append(self)

    def check(self, loc):
        """Refuse (located) what netc.v2's evaluators do not read: sequences, a weight not [B, 1], a label
        that is no id."""
        for x in self.layers():
            if x.seq is not None:
                raise error(f"paddle.evaluator.{self.kind}: '{x.name}' is a sequence; evaluators of sequences are "
                            f"not in netc.v2 yet", loc, [("defined here", x.loc)])
        if self.weight is not None and tuple(self.weight.shape[1:]) != (1,):
            raise error(f"paddle.evaluator.{self.kind}: weight '{self.weight.name}' is one value per sample "
                        f"(dense_vector(1)), it has shape {self.weight.shape_str()}", loc,
                        [("defined here", self.weight.loc)])
        if self.label is not None and (self.label.itype is None or not self.label.itype.is_index):
            raise error(f"paddle.evaluator.{self.kind}: label '{self.label.name}' is no integer_value data layer "
                        f"(dense labels are not in netc.v2 yet)", loc, [("defined here", self.label.loc)])

    def layers(self) -> list:
        return [x for x in (self.input, self.label, self.weight) if x is not None]

    def weights(self, values, n) -> np.ndarray:
        return np.ones(n) if self.weight is None else _rows(values, self.weight, n)[:, 0]

    def labels(self, values, n) -> np.ndarray:
        return values[self.label.name].detach().cpu().numpy().reshape(n).astype(np.int64)


class ClassificationError(Evaluator):
    kind = "classification_error"

    def __init__(self, input, label, name, weight, top_k, loc):  # noqa: A002
        if isinstance(top_k, bool) or not isinstance(top_k, int) or top_k < 1:
            raise error(f"paddle.evaluator.classification_error: top_k is a positive integer, got {top_k!r}", loc)
        self.top_k = top_k
        super().__init__(input, label, weight, name, loc)

    def start(self):
        return {"wrong": 0.0, "samples": 0.0}

    def add(self, s, values, n):
        scores, lab, w = _rows(values, self.input, n), self.labels(values, n), self.weights(values, n)
        top = np.argsort(-scores, axis=1, kind="stable")[:, :self.top_k]
        wrong = ~(top == lab[:, None]).any(axis=1)
        s["wrong"] += float((wrong * w).sum())
        s["samples"] += float(w.sum()) if self.weight is not None else n

    def metrics(self, s) -> dict:
        return {self.name: s["wrong"] / s["samples"] if s["samples"] else 0.0}


class Auc(Evaluator):
    kind = "auc"

    def start(self):
        return {"pos": {}, "neg": {}}

    def add(self, s, values, n):
        score = _rows(values, self.input, n)[:, -1].astype(np.float32)
        lab, w = self.labels(values, n), self.weights(values, n)
        if (score < 0).any() or (score > 1).any():
            bad = float(score[(score < 0) | (score > 1)][0])
            raise error(f"paddle.evaluator.auc '{self.name}': a score {bad:g} outside [0, 1] (PaddlePaddle's bins "
                        f"hold probabilities: give it a Sigmoid or Softmax layer)", self.loc)
        bins = (score * np.float32(BINS)).astype(np.uint32)          # the float product, truncated
        for b, lb, wi in zip(bins.tolist(), lab.tolist(), w.tolist()):
            side = s["neg"] if lb == 0 else s["pos"]
            side[b] = side.get(b, 0.0) + wi

    def metrics(self, s) -> dict:
        pos = neg = area = 0.0
        for b in sorted(set(s["pos"]) | set(s["neg"]), reverse=True):     # empty bins add no area
            prev_pos, prev_neg = pos, neg
            pos += s["pos"].get(b, 0.0)
            neg += s["neg"].get(b, 0.0)
            area += abs(neg - prev_neg) * (pos + prev_pos) / 2.0
        return {self.name: area / pos / neg if pos > 0 and neg > 0 else 0.0}


def _precision(tp, fp):
    return tp / (tp + fp) if tp > 0 or fp > 0 else 1.0


def _f1(p, r):
    return 2 * p * r / (p + r) if p > 0 or r > 0 else 0.0


class PrecisionRecall(Evaluator):
    kind = "precision_recall"

    def __init__(self, input, label, positive_label, name, weight, loc):  # noqa: A002
        if positive_label is not None and (isinstance(positive_label, bool) or not isinstance(positive_label, int)):
            raise error(f"paddle.evaluator.precision_recall: positive_label is a class id, got {positive_label!r}",
                        loc)
        self.positive = -1 if positive_label is None else positive_label
        super().__init__(input, label, weight, name, loc)

    def start(self):
        return {}

    def add(self, s, values, n):
        scores, lab, w = _rows(values, self.input, n), self.labels(values, n), self.weights(values, n)
        dim = scores.shape[1]
        if not s:
            s.update(tp=np.zeros(dim), fp=np.zeros(dim), fn=np.zeros(dim))
        guess = scores.argmax(axis=1)
        right = guess == lab
        np.add.at(s["tp"], guess[right], w[right])
        np.add.at(s["fp"], guess[~right], w[~right])
        np.add.at(s["fn"], lab[~right], w[~right])

    def metrics(self, s) -> dict:
        if not s:
            return {}
        tp, fp, fn = s["tp"], s["fp"], s["fn"]
        if self.positive != -1:
            if not 0 <= self.positive < len(tp):
                raise error(f"paddle.evaluator.precision_recall '{self.name}': positive_label {self.positive} is "
                            f"not in 0 .. {len(tp) - 1}", self.loc)
            k = self.positive
            p, r = _precision(tp[k], fp[k]), _precision(tp[k], fn[k])
            return {f"{self.name}.precision": p, f"{self.name}.recal": r, f"{self.name}.F1-score": _f1(p, r)}
        ps = [_precision(a, b) for a, b in zip(tp, fp)]
        rs = [_precision(a, b) for a, b in zip(tp, fn)]
        mp, mr = float(np.mean(ps)), float(np.mean(rs))
        return {f"{self.name}.macro-average-precision": mp, f"{self.name}.macro-average-recall": mr,
                f"{self.name}.macro-average-F1-score": _f1(mp, mr),
                f"{self.name}.micro-average-precision": _precision(tp.sum(), fp.sum())}


class Sum(Evaluator):
    kind = "sum"

    def start(self):
        return {"total": 0.0, "samples": 0.0}

    def add(self, s, values, n):
        w = self.weights(values, n)
        x = _rows(values, self.input, n)
        s["total"] += float((x.sum(axis=1) * w).sum())
        s["samples"] += float(w.sum()) if self.weight is not None else n

    def metrics(self, s) -> dict:
        return {self.name: s["total"] / s["samples"] if s["samples"] else 0.0}


def classification_error(input, label, name=None, weight=None, top_k=None, threshold=None):  # noqa: A002
    loc = user_loc()
    if threshold is not None:
        raise error("paddle.evaluator.classification_error: threshold (a dense, multi-binary label) is not in "
                    "netc.v2 yet", loc)
    return ClassificationError(input, label, name, weight, 1 if top_k is None else top_k, loc)


def auc(input, label, name=None, weight=None):  # noqa: A002
    return Auc(input, label, weight, name, user_loc())


def precision_recall(input, label, positive_label=None, weight=None, name=None):  # noqa: A002
    return PrecisionRecall(input, label, positive_label, name, weight, user_loc())


def sum(input, name=None, weight=None):  # noqa: A001, A002 (PaddlePaddle's names)
    return Sum(input, None, weight, name, user_loc())


def joining(layers) -> tuple:
    """(the evaluators whose label and weight are in `layers` and whose input is too or is computed from
    them alone; those inputs, to compute as extra outputs) -- PaddlePaddle's parse_network keeps the
    evaluators whose input layers are all in the topology."""
    held = set(layers)
    chosen, extra = [], []
    for ev in REGISTERED:
        inp = ev.input
        if inp not in held and (inp.is_data or not all(i in held for i in inp.inputs)):
            continue          # its input is not this topology's (nor computed from it)
        if all(x in held for x in ev.layers() if x is not inp):
            chosen.append(ev)
            if inp not in held and inp not in extra:
                extra.append(inp)
    return chosen, extra


class Stats:
    """The statistics of a list of evaluators over some batches: start(), add(values, n), metrics()."""

    def __init__(self, evaluators):
        self.evaluators = evaluators
        self.layers = sorted({x.name for ev in evaluators for x in ev.layers()})   # the values it reads
        self.start()

    def __call__(self, values, n):
        self.add(values, n)

    def start(self):
        self.held = [ev.start() for ev in self.evaluators]

    def add(self, values, n):
        for ev, s in zip(self.evaluators, self.held):
            ev.add(s, values, n)

    def metrics(self) -> dict:
        out = {}
        for ev, s in zip(self.evaluators, self.held):
            out.update(ev.metrics(s))
        return out


__all__ = ["classification_error", "auc", "precision_recall", "sum"]
__getattr__ = missing_names(__name__, __all__)
