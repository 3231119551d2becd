"""SINGA (Apache SINGA v0.1 - v0.3) job.conf importer, front half (a package by concern: schema.py,
reader.py, graph.py, setup.py; the entry points here): schema-aware reading of the
protobuf text (prototext.py does the syntax) and SINGA's own graph construction, per phase and
partition count, exactly as /work/shared/spec/singa-format.md sections 4-8 describe it.

    net = build_singa("examples/cifar10/job.conf", phase="train")      # -> SingaNet
    for n in net.nodes: print(n.name, n.type, n.srcs, n.shape, [p.shape for p in n.params])

The result is plain data (SingaNet / SingaNode / SingaParam): nodes in SINGA's execution order
(Graph::Sort), each with SINGA's node name, layer type, sources, partition id, output shape,
parameter shapes and names, the layer's configuration values and the source location. Mapping
it onto netc's IR is a separate step.

Versions ("modes"):  "0.1" (tag v0.1.0), "0.2" (tag v0.2.0), "0.3" (tag v0.3.0-rc3), "dev" (the
2016 pull-request branch: v0.3 schema plus store_conf.ratio and cluster.ngpu_per_group). The
v0.2/v0.3/dev graph code is one mode. "pre0.1" (the May-July 2015 ModelProto dialect) is
recognized and rejected with a diagnostic that says why. detect_version() documents how the mode
is chosen from a file's content when `version` is not given.

Errors are NetcErrors carrying Diagnostics with file:line:col (errors that are independent are
collected and reported together); warnings go to SingaNet.diagnostics (and to `diag` if given).
Every SINGA misbehaviour listed in the spec's section 11 (B1-B18) that can be seen while reading
or building is reported: see the B-numbers in the comments of the modules.
"""
from __future__ import annotations

import os

from ...diagnostics import Diagnostic, DiagnosticEngine, Loc, NetcError
from .. import prototext as pt

from .reader import ConfReader, detect_dialect
from .schema import PHASES, Msg, Schema, looks_like_path, read_conf_text, load_extension_proto, load_schema
from .graph import MAX_PARTITIONS, SingaNet, BuildContext, build_v1, build_v2, sort_nodes
from .setup import finish_nodes, setup_all
# the package's public names (__all__), wherever they are defined
from .graph import RNNLM_PLUGIN, SingaNode, SingaParam, UserLayerRule  # noqa: F401,E402
from .reader import detect_version  # noqa: F401,E402
from .schema import VERSIONS  # noqa: F401,E402

__all__ = ["build_singa", "build_all", "read_job", "detect_version", "SingaJob", "SingaNet", "SingaNode",
           "SingaParam", "UserLayerRule", "RNNLM_PLUGIN", "VERSIONS", "load_schema", "load_extension_proto"]

# ------------------------------------------------------------------------------------------
# Public API

_VERSION_ALIASES = {"0.1": "0.1", "0.1.0": "0.1", "v0.1": "0.1", "v0.1.0": "0.1",
                    "0.2": "0.2", "0.2.0": "0.2", "v0.2": "0.2", "v0.2.0": "0.2",
                    "0.3": "0.3", "0.3.0": "0.3", "v0.3": "0.3", "v0.3.0": "0.3", "0.3.0-rc3": "0.3",
                    "v0.3.0-rc3": "0.3", "dev": "dev", "pre0.1": "pre0.1", "pre-0.1": "pre0.1"}


class SingaJob:
    """A job file read against its version's schema (see read_job)."""

    def __init__(self, job: Msg, version: str, reason: str, file: str, schema: Schema):
        self.job, self.version, self.reason, self.file, self.schema = job, version, reason, file, schema

    @property
    def phases(self) -> list[str]:
        """The nets SINGA builds for this job (spec 4)."""
        ph = ["kTrain"]
        if self.job.get("test_steps") > 0:
            ph.append("kTest")
        if self.job.get("validate_steps") > 0:
            ph.append("kVal")
        return ph


def _source(path_or_text, file):
    if isinstance(path_or_text, os.PathLike) or (isinstance(path_or_text, str) and looks_like_path(path_or_text)):
        path = str(path_or_text)
        return read_conf_text(path), file or path, path
    if not isinstance(path_or_text, str):
        raise NetcError(f"expected a path or the text of a job file, got {type(path_or_text).__name__}")
    return path_or_text, file or "<input>", None


def _alongside_protos(path: str) -> list[str]:
    """User .proto files next to a job file: those whose name starts with the job file's name
    up to and including its last '_' (all *.proto when the name has no '_'):
    '0.2.0_rnnlm_job.conf' -> '0.2.0_rnnlm_*.proto'; 'examples/rnnlm/job.conf' -> 'examples/rnnlm/*.proto'."""
    d, base = os.path.split(os.path.abspath(path))
    prefix = base[:base.rfind("_") + 1] if "_" in base else ""
    try:
        names = sorted(f for f in os.listdir(d) if f.endswith(".proto") and f.startswith(prefix))
    except OSError:
        return []
    return [os.path.join(os.path.dirname(path), f) for f in names]


def read_job(path_or_text, version: str | None = None, *, file: str | None = None,
             extension_protos=None) -> SingaJob:
    """Parse a job file and read it against the schema of `version` (detected when None).
    extension_protos: user .proto files declaring `[ext]` fields; when None and the job is a
    file, the .proto files next to it are loaded the first time an extension is used."""
    text, file, path = _source(path_or_text, file)
    tree = pt.parse_text(text, file)
    detected, reason, where = detect_dialect(tree)
    if version is not None:
        v = _VERSION_ALIASES.get(str(version))
        if v is None:
            raise NetcError(f"unknown SINGA version '{version}' (use one of 0.1, 0.2, 0.3, dev)")
        if not (v == "pre0.1" and detected == "pre0.1"):
            reason = "given"
    else:
        v = detected
    if v == "pre0.1":
        raise _pre01_error(tree, file, reason, where)
    schema = load_schema(v).copy()
    loader = None
    if extension_protos is not None:
        for p in extension_protos:
            load_extension_proto(p, schema)
    elif path is not None:
        todo = _alongside_protos(path)

        def loader(f):
            loaded = False
            while todo:
                load_extension_proto(todo.pop(0), schema)
                loaded = True
            return loaded

    rd = ConfReader(schema, v, file, loader)
    job = rd.convert(tree, schema.msg("JobProto"), Loc(file, 1, 1))
    if rd.errors:
        raise NetcError(rd.errors)
    return SingaJob(job, v, reason, file, schema)


# Markers of the pre-0.1 snapshots (spec appendix A): the May-June 2015 ModelProto quotes layer
# types and names confs `*_param`, with a flat updater; the late-June/July ModelProto has enum types,
# `*_conf` confs and `updater { base_lr lr_change ... }`; the July-22 JobProto wraps that model in
# `model { }` next to `cluster { }`.
_PRE01_MAYJUNE = {"base_learning_rate", "learning_rate_change_method", "learning_rate_change_frequency",
                  "datablob", "param_type"}


def _pre01_error(tree, file, reason, where=None):
    old = []   # (what, loc) of May-June markers
    wrapper = None
    for f in tree.fields:
        if f.name == "model" and f.is_message and not f.ext:
            wrapper = f.loc
    stack = [(tree, "")]
    while stack:
        msg, parent = stack.pop()
        for f in msg.fields:
            if f.ext:
                continue
            if f.is_message:
                stack.append((f.value, f.name))
                if f.name.endswith("_param"):
                    old.append((f"'{f.name}'", f.loc))
            elif f.name in _PRE01_MAYJUNE:
                old.append((f"'{f.name}'", f.loc))
            elif f.name == "type" and f.value.kind == "string" and parent in ("layer", "sublayers"):
                old.append((f"the quoted layer type {f.value.text}", f.value.loc))
    old.sort(key=lambda x: (x[1].line, x[1].col))
    if wrapper is not None and old:
        what, loc = old[0]
        d = Diagnostic("error", f"{what} belongs to the May-June 2015 (pre-0.1) ModelProto, but this file uses the "
                       f"July-2015 JobProto (`model {{ }}` wrapper): it parses under no SINGA schema", loc)
        d.note("the `model { }` wrapper is here", wrapper)
        more = ", ".join(f"{w} ({l.line}:{l.col})" for w, l in old[1:6])
        if more:
            d.note(f"other obsolete fields: {more}{', ...' if len(old) > 6 else ''}")
        return NetcError(d)
    if wrapper is not None:
        era = "the July-2015 JobProto with a `model { }` wrapper"
        loc = wrapper
    elif old:
        era = "the May-June 2015 ModelProto (quoted layer types, `*_param` confs, flat updater)"
        loc = old[0][1]
    else:
        era = "the June-July 2015 ModelProto (flat param fields such as init_method, `updater { lr_change }`)"
        loc = where or Loc(file, 1, 1)
    d = Diagnostic("error", f"this file is in a pre-0.1 SINGA dialect, {era} (detected from {reason}); netc reads "
                   f"the job files of SINGA v0.1, v0.2 and v0.3", loc)
    d.note("see the spec's appendix A for the differences; the net has to be rewritten in the v0.1 form")
    return NetcError(d)


def build_singa(path_or_text, phase: str = "train", version: str | None = None, K: int | None = None, *,
                file: str | None = None, extension_protos=None, plugins: dict | None = None,
                record_shapes: dict | None = None, fix_share_from: bool = False,
                diag: DiagnosticEngine | None = None) -> SingaNet:
    """Build the logical net SINGA builds for `phase` ('train' | 'test' | 'val', or kTrain/kTest/kVal):
    its graph with one partition (nodes '<layer>@0'). K, the partitions the job asks for (default:
    cluster.nworkers_per_group for train, 1 otherwise), is recorded as SingaNet.workers; SINGA's
    partitioned graph (connection layers, bridges, K nodes per layer) is made from the IR by the
    `partition` pass (netc/passes/partition/singa.py).

    path_or_text: a path, the text of a job file, or a SingaJob from read_job.
    plugins: {user_type: UserLayerRule} for user layers (RNNLM_PLUGIN for the rnnlm example).
    record_shapes: {data layer name: record shape} for v0.1 kShardData/kLMDBData layers
      (default: [28, 28] for MNIST, [3, 32, 32] for CIFAR-10, judged from the path or the parser
      layer reading it -- what SINGA's shard creators write).
    fix_share_from: resolve v0.2+ `share_from: "w"` to the unrolled '0#w' (B1; not SINGA behaviour).
    diag: also report warnings there."""
    job = path_or_text if isinstance(path_or_text, SingaJob) else read_job(
        path_or_text, version, file=file, extension_protos=extension_protos)
    ph = PHASES.get(phase)
    if ph is None:
        raise NetcError(f"unknown phase '{phase}' (use train, test or val)")
    if K is None:
        K = job.job.get("cluster").get("nworkers_per_group") if ph == "kTrain" else 1
    if not isinstance(K, int) or K < 1:
        raise NetcError(f"the number of partitions must be at least 1, got {K}",
                        job.job.get("cluster").at("nworkers_per_group"))
    if K > MAX_PARTITIONS:
        raise NetcError(f"the number of partitions must be at most {MAX_PARTITIONS} (netc builds one node per "
                        f"partition of every partitioned layer, and K x K connections between them), got {K}",
                        job.job.get("cluster").at("nworkers_per_group"))
    if not job.job.has("neuralnet"):
        raise NetcError("the job has no 'neuralnet'", Loc(job.file, 1, 1))
    ctx = BuildContext(job.version, job.file, ph, 1, plugins, record_shapes, fix_share_from, workers=K)
    if ctx.v1:
        order = build_v1(ctx, job.job)
    else:
        order = sort_nodes(ctx, build_v2(ctx, job.job))
    setup_all(ctx, order)
    nodes = finish_nodes(ctx, order)
    net = SingaNet(job.file, job.version, ph, 1, nodes, ctx.warnings, ctx.non_singa, job.job, job.reason, workers=K)
    if diag is not None:
        diag.extend(ctx.warnings)
    return net


def build_all(path_or_text, version: str | None = None, **kw) -> dict[str, SingaNet]:
    """Every net the job builds (spec 4): kTrain, plus kTest if test_steps > 0 and kVal if
    validate_steps > 0. Keyword arguments as for build_singa (K applies to the training net)."""
    job = path_or_text if isinstance(path_or_text, SingaJob) else read_job(
        path_or_text, version, file=kw.pop("file", None), extension_protos=kw.pop("extension_protos", None))
    K = kw.pop("K", None)
    return {ph: build_singa(job, ph, K=K if ph == "kTrain" else None, **kw) for ph in job.phases}
