"""The `netc` command: check, opt, explain, import, export, run, sample, compile. It parses arguments, calls the
library (netc/pipelines.py for the passes; netc/runtime/ for running, training, the workers and
parameter files; codegen for compiling and tuning; netc/explain.py for the report) and prints.

User errors print clang-style diagnostics and exit 1; an internal error (a bug in netc) exits 2
and says so.
"""
from __future__ import annotations

import argparse
import contextlib
import dataclasses
import os
import sys
import traceback

from .version import __version__
from .diagnostics import DiagnosticEngine, NetcError

EXIT_USER, EXIT_INTERNAL = 1, 2


def _common(p):
    p.add_argument("file", help="network file (.nd, or IR text .mlir)")
    p.add_argument("--phase", choices=("train", "val", "test"), default="train",
                   help="which phase's layers to keep (SINGA include/exclude); default train")
    p.add_argument("--werror", action="store_true", help="treat warnings as errors")
    p.add_argument("--batch", type=int, default=1, metavar="B",
                   help="batch size for formats that do not fix it (Brainstorm: shapes (T, B, ...), T = 1); default 1")
    _sizes(p)
    _singa_version(p)


def _sizes(p):
    p.add_argument("--size", action="append", default=None, metavar="NAME=N",
                   help="give a named size a value: a .nd file's `size NAME = N` (e.g. --size T=100), a Brainstorm "
                        "architecture's T (its sequence length, default 1); repeatable")


def _singa_version(p):
    p.add_argument("--singa-version", choices=("0.1", "0.2", "0.3", "dev"), default=None,
                   help="read a SINGA job.conf as this release's format (default: detected from the file)")


def _precision(p, dtype_help):
    """--dtype / --tf32 / --tf32x3 of compile and opt (checked by runtime.flags.precision_options: a bad dtype is exit 1)."""
    p.add_argument("--dtype", default=None, metavar="DTYPE",
                   help=dtype_help + "; accumulation is always f32. Softmax outputs, losses and batch-norm "
                        "parameters stay f32")
    p.add_argument("--tf32", action="store_true",
                   help="let f32 convolutions and inner products use TF32 tensor cores (off by default)")
    p.add_argument("--tf32x3", action="store_true",
                   help="compute f32 convolutions and inner products as three TF32 tensor-core products each "
                        "(3xTF32: about f32's accuracy; off by default)")


def _stdout_output(p, metavar, what):
    """-o/--output of a command that prints its result (opt, explain): every command that writes a
    file takes -o/--output (compile, import, export, run too)."""
    p.add_argument("-o", "--output", default="-", metavar=metavar, help=f"write {what} to this file (default: stdout)")


def _training(p, run: bool = False):
    """The training flags: the backward and optimizer passes' options (explain, opt, run) and,
    for `run`, the training loop's."""
    what = ("run training steps (on the CPU target unless --target, --reference or --dtype f64 say otherwise): "
            "forward, the generated gradient ops and the optimizer's updates; print the loss per step; -o writes "
            "the trained parameters (and optimizer state)" if run else
            "the training program: the backward and optimizer passes after the default pipeline (a training step: "
            "forward, gradients, updates)")
    t = p.add_argument_group("training")
    t.add_argument("--train", action="store_true", help=what)
    t.add_argument("--optimizer", default=None, metavar="NAME",
                   help="sgd (default), momentum, nesterov, adam, rmsprop, adagrad, adadelta, adamax (a SINGA job's updater when the "
                        "file has one)")
    t.add_argument("--momentum", type=float, default=None, metavar="M", help="momentum (default 0.9 where it applies)")
    t.add_argument("--weight-decay", type=float, default=None, metavar="WD", help="L2 weight decay (default 0)")
    t.add_argument("--clip-norm", type=float, default=None, metavar="C",
                   help="clip the gradients to this global norm before the update")
    t.add_argument("--freeze", action="append", default=[], metavar="NAME,...",
                   help="parameters (or layers, or patterns like d_*) that are not trained")
    t.add_argument("--loss", choices=("softmax", "euclidean"), default=None,
                   help="a network without a loss gets one on its output, fed by a new input 'label'")
    t.add_argument("--loss-on", default=None, metavar="LAYER",
                   help="with --loss: the layer the loss goes on (default: the network's one output)")
    t.add_argument("--train-network", default=None, metavar="NAME",
                   help="differentiate this network only (default: every network with a loss; `run` also "
                        "takes --network)")
    if not run:
        return
    t.add_argument("--lr", type=float, default=None, metavar="LR", help="learning rate (default 0.01, or the file's "
                                                                        "schedule)")
    t.add_argument("--steps", type=int, default=None, metavar="N", help="training steps (default: 1, or --epochs)")
    t.add_argument("--epochs", type=int, default=None, metavar="E",
                   help="with --data: passes over the data (default 1; --steps stops earlier)")
    t.add_argument("--data", metavar="TRAIN.npz",
                   help="training samples: one array per data input, first axis the samples; batches of the "
                        "network's batch size in a seeded random order (default: the same seeded random inputs, "
                        "or --inputs, every step)")
    t.add_argument("--eval", metavar="TEST.npz", help="after training: loss and accuracy on these samples")
    t.add_argument("--grads", metavar="GRADS.npz", help="write the first step's parameter gradients")
    t.add_argument("--check-grads", action="store_true",
                   help="compare every generated gradient with torch.autograd over the forward reference (float64); "
                        "print the worst relative error per parameter; exit 1 beyond 1e-8")
    t.add_argument("--history", metavar="HIST.json", help="write the loss per step as JSON")
    t.add_argument("--plot", metavar="LOSS.png|svg|pdf", help="draw the loss curve (matplotlib)")


def _parser_check(sub):
    """`netc check`'s arguments."""
    p = sub.add_parser("check", help="parse and check a network; print nothing if it is well-formed")
    _common(p)
    _training(p)


def _parser_opt(sub):
    """`netc opt`'s arguments."""
    p = sub.add_parser("opt", help="run passes and print the resulting IR")
    _common(p)
    p.add_argument("-p", "--passes", default=None,
                   help="comma-separated pipeline (default: the full pipeline); prerequisites are added")
    p.add_argument("--print-ir-after-all", action="store_true", help="print the IR after every pass")
    p.add_argument("--print-ir-after", action="append", default=[], metavar="PASS",
                   help="print the IR after PASS (repeatable, or comma-separated)")
    p.add_argument("--timing", action="store_true", help="print a per-pass time report to stderr")
    p.add_argument("--no-locs", action="store_true", help="omit loc(...) from printed IR")
    p.add_argument("--list-passes", action="store_true", help="list the passes and exit")
    p.add_argument("--workers", dest="partition_workers", type=int, default=None, metavar="K",
                   help="partition the network over K workers (the partition pass; -p split-workers: one program "
                        "per rank)")
    _stdout_output(p, "OUT.mlir", "the IR")
    _precision(p, "add the set-dtype pass: floating tensors and parameters in f32, bf16 or fp16")
    _training(p)


def _parser_explain(sub):
    """`netc explain`'s arguments."""
    p = sub.add_parser("explain", help="IR after each pass, then shapes, parameters, FLOPs and memory per layer")
    _common(p)
    _training(p)
    p.set_defaults(batch=None)    # a Brainstorm file's B (default 1); other formats: rescale their inputs to B
    p.add_argument("--format", choices=("text", "json"), default="text")
    _stdout_output(p, "OUT.txt|OUT.json", "the report")
    p.add_argument("--brief", action="store_true", help="only the table, not the IR after each pass")
    p.add_argument("--device", metavar="DEV",
                   help="estimate time per layer with Paleo's model: h100, h200, a100, titanx, k40, ... or "
                        "custom:PEAK_FLOPS,BANDWIDTH (FLOP/s, byte/s; SI suffixes allowed: custom:67T,3.35T)")
    p.add_argument("--ppp-comp", type=float, default=None, metavar="F",
                   help="with --device: Paleo's percent of peak for computation and on-device traffic (default 1.0)")
    p.add_argument("--ppp-comm", type=float, default=None, metavar="F",
                   help="with --device: Paleo's percent of peak for communication (default 1.0)")
    p.add_argument("--network", metavar="NET", default=None,
                   help="with --workers/--hybrid: the network between workers, one of Paleo's: aws, ethernet "
                        "(default), ethernet20, infiniband, pcie2, pcie3")
    p.add_argument("--workers", metavar="K|N,N,...",
                   help="one number K, on a network with partition_dim / location / parallel splits (or a SINGA job): "
                        "the network on K workers, a table per worker and the communication per edge and in total "
                        "(times on --network, with --device per worker too), --dot draws workers as clusters; a list "
                        "(or a network without such annotations), with --device: Paleo's data-parallel scaling table "
                        "for these worker counts (e.g. 1,2,4,8,16,32,64,128)")
    p.add_argument("--scaling", choices=("weak", "strong"), default="weak",
                   help="with --workers: weak (each worker keeps the batch; default) or strong (the batch is split)")
    p.add_argument("--hybrid", type=int, metavar="K",
                   help="with --device: Paleo's hybrid simulation (\"one weird trick\"): layers without '@' data "
                        "parallel over K workers, layers with '@' model parallel")
    p.add_argument("--profile", metavar="PROF.json",
                   help="with --device: divide each layer's time by the measured efficiency of its op type, from a "
                        "profile written by `netc run NET.so --profile --profile-out PROF.json`")
    p.add_argument("--memory", action="store_true",
                   help="plan memory and show it: buffers, classes, offsets, lifetimes; arena vs lower bound")
    p.add_argument("--memory-budget", type=int, metavar="BYTES", default=None,
                   help="with --train: recompute cheap forward ops (pointwise, pooling, normalization) in the "
                        "backward pass until the memory plan fits BYTES (the rematerialize pass)")
    p.add_argument("--layout", metavar="OUT.json",
                   help="write a layout (read back by `netc check`): for a Brainstorm architecture, the layout "
                        "Brainstorm's create_layout writes (its hubs; as `export --format hub-layout`); for any other "
                        "network, netc's memory plan in Brainstorm's March-2015 layout format (--layout-kind)")
    p.add_argument("--layout-kind", choices=("hub", "plan"), default=None,
                   help="what --layout writes: hub (Brainstorm's own layout of a Brainstorm architecture; the default "
                        "for one) or plan (netc's memory plan as a layout; the default for every other file)")
    p.add_argument("--plot", metavar="PLAN.png|svg|pdf",
                   help="draw the memory plan (matplotlib, the `plot` extra): offset against schedule step, one "
                        "colour per buffer class, the lower bound as a line")
    p.add_argument("--no-reuse", action="store_true", help="plan without sharing memory between tensors")
    p.add_argument("--verify", action="store_true",
                   help="verify the memory plan at every batch from 1 to the compiled one (always verified "
                        "at the compiled batch)")
    p.add_argument("--dot", nargs="?", const="-", metavar="FILE",
                   help="write the graph in Graphviz DOT to FILE (also FILE.svg when `dot` is installed); "
                        "'-' or no FILE prints it")
    p.add_argument("--nchw", action="store_true",
                   help="show 4-D shapes in NCHW order (SINGA's) instead of netc's NHWC")


def _parser_import(sub):
    """`netc import`'s arguments."""
    p = sub.add_parser("import", help="convert a Paleo JSON network (more formats to come) into .nd source")
    p.add_argument("file", help="the original file (format detected from its content)")
    p.add_argument("-o", "--output", default="-", metavar="OUT.nd", help="where to write (default: stdout)")
    p.add_argument("--werror", action="store_true", help="treat warnings as errors")
    _sizes(p)
    _singa_version(p)


def _parser_run(sub):
    """`netc run`'s arguments."""
    p = sub.add_parser("run", help="execute a network (a source, or a compiled NET.so on the GPU) and print (or save) "
                                   "its outputs")
    _common(p)
    p.set_defaults(batch=None)   # NET.so: the compiled batch; sources: the file's (--batch B rescales them)
    p.add_argument("--reference", action="store_true",
                   help="run the torch reference executor (the oracle, f64 arithmetic); same as --target reference")
    p.add_argument("--target", choices=("reference", "cpu", "interp", "cuda"), default=None,
                   help="reference: the torch reference executor; cpu: the same ops in f32 arithmetic with fast CPU "
                        "lowerings (runtime/cpu.py); interp: the compiled kernels, schedule and memory plan on the "
                        "CPU through Triton's interpreter (f32); cuda (with --workers K): each rank's program "
                        "compiled to a library and run on a GPU. Default: cpu; the reference executor where a flag "
                        "only it takes is given (--dtype f64, --check-grads, --state-in/--state-out) and with "
                        "--workers 1")
    p.add_argument("--compare", action="store_true",
                   help="with --target interp or cpu (the default) or a NET.so: also print the max relative error "
                        "against the reference (exit 1 beyond the precision's tolerance)")
    p.add_argument("--source", metavar="FILE",
                   help="with NET.so --compare: the network source (default: the one recorded at compile time)")
    p.add_argument("--input", action="append", default=[], metavar="NAME=PATH.npy",
                   help="feed input NAME from a .npy file (repeatable); without inputs, random ones")
    p.add_argument("--inputs", metavar="IN.npz", help="feed inputs from an .npz archive, by input name")
    p.add_argument("--params", metavar="P.npz|P.safetensors",
                   help="parameters by name (missing ones are random; a Brainstorm net.h5 works too); with NET.so "
                        "they replace embedded ones")
    p.add_argument("--seed", type=int, default=0, help="seed of the random inputs and parameters (default 0)")
    p.add_argument("--network", metavar="NAME", help="run this network only (default: every network)")
    p.add_argument("--dtype", default=None, metavar="DTYPE",
                   help="--reference: the executor's floating dtype, f64 (default) or f32 (without --target, f64 "
                        "runs the reference executor); --target interp: the dtype the network is compiled in, f32 "
                        "(default), bf16 or fp16 (--compare then checks against the f64 reference with that dtype's "
                        "tolerance)")
    p.add_argument("--tf32", action="store_true",
                   help="with --target interp: f32 matrix products use TF32 (the interpreter rounds the operands "
                        "as the tensor cores do)")
    p.add_argument("--tf32x3", action="store_true",
                   help="with --target interp: f32 matrix products as three TF32 products each (3xTF32)")
    p.add_argument("-o", "--output", metavar="OUT.npz", help="write the outputs to an .npz archive instead of a summary")
    p.add_argument("--state-in", metavar="S.npz",
                   help="--reference (the default with it): start every recurrent layer from the state in S.npz (a "
                        "previous run's --state-out: Brainstorm's context), fed to the inputs of its initial state")
    p.add_argument("--state-out", metavar="S.npz",
                   help="--reference (the default with it): write every recurrent layer's final state (an Lstm's h "
                        "and c) to S.npz, by the name of the input it starts the next run from (--state-in)")
    p.add_argument("--spatial", metavar="N|HxW|min",
                   help="scale the network down (or up): every 4-D input gets H x W = N x N (or HxW; min: the "
                        "smallest valid N) before shape inference; convolutions, pools and inner products follow. "
                        "With --batch B (every input's batch becomes B) a big network runs small")
    p.add_argument("--opaque-as-identity", action="store_true",
                   help="run layers of unknown type (opaque pass-throughs, Paleo's Generic layers) as the identity, "
                        "with a warning naming them; without it such a network cannot run on --target interp")
    p.add_argument("--interp-blocks", choices=("cuda", "large"), default=None,
                   help="with --target interp: the kernels' tile sizes; cuda (default): exactly the .so's; large: "
                        "tiles as large as the problem, the same kernels 10-100x faster under the interpreter")
    p.add_argument("--tuning", metavar="FILE.json", default=None,
                   help="with --target interp: the kernels with a tuning file's tiles, warps, stages and split-K "
                        "(its sm_90 entries; `netc compile --autotune` writes it on a GPU), as the tuned .so runs "
                        "them; --compare checks them against the reference")
    p.add_argument("--profile", action="store_true",
                   help="with NET.so: time the input copies, every kernel launch and the output copies (CUDA events) "
                        "and print them beside the cost model's prediction, with the efficiency per op type")
    p.add_argument("--repeat", type=int, default=None, metavar="N",
                   help="with --profile: timed runs (default 20; median and min), after 3 warm-up runs")
    p.add_argument("--device", metavar="DEV", default=None,
                   help="with --profile: the cost model's device (h100, h200, a100, ... or custom:PEAK,BANDWIDTH); "
                        "default: from torch's name of the GPU")
    p.add_argument("--profile-out", metavar="PROF.json", default=None,
                   help="with --profile: also write the profile as JSON (netc explain --profile reads it)")
    _training(p, run=True)
    p.add_argument("--workers", dest="partition_workers", type=int, default=None, metavar="K",
                   help="run on K processes with torch.distributed (gloo): the network partitioned by its "
                        "partition_dim / location / parallel splits (a SINGA job: its own nworkers_per_group), one "
                        "program per rank; rank 0 prints the outputs as the single-process run names them. 1: the "
                        "unpartitioned network in this process (the baseline). torchrun --nproc-per-node K -m netc run "
                        "FILE --workers K works too")
    p.add_argument("--timeout", type=float, default=None, metavar="S",
                   help="with --workers: the process-group timeout in seconds (default 120): a rank that dies or hangs "
                        "makes the others exit within it, naming the rank and the op")
    p.add_argument("--comm-log", metavar="FILE.json", default=None,
                   help="with --workers: write each rank's bytes sent and the partition pass's prediction")
    for a in p._actions:
        if a.dest == "batch":   # a source's inputs all take batch B (a NET.so runs at batch B)
            a.help = ("run at batch B: every input's first axis becomes B (a Brainstorm file's B, default 1); "
                      "NET.so: at most its compiled batch (default: that batch)")


def _parser_sample(sub):
    """`netc sample`'s arguments."""
    p = sub.add_parser("sample", help="draw text from a trained sequence model (SINGA's char-rnn) one step at a "
                                      "time, its recurrent state carried from step to step")
    p.add_argument("file", help="the network (the training file: its loss's scores are what is sampled)")
    p.add_argument("--params", required=True, metavar="P.npz|P.safetensors",
                   help="the trained parameters (netc run --train -o writes them)")
    p.add_argument("--vocab", metavar="VOCAB.txt",
                   help="SINGA's vocab.txt: the characters one after another, an id a character's position "
                        "(examples/char_rnn_data.py writes one); without it --prime and the output are ids")
    p.add_argument("--prime", default=None, metavar="TEXT",
                   help="the text fed first, one character a step (default: a newline; without --vocab: ids)")
    p.add_argument("-n", "--length", type=int, default=500, metavar="N", help="characters to draw (default 500)")
    p.add_argument("--temperature", type=float, default=1.0, metavar="T",
                   help="divide the scores by T before the softmax (default 1; below 1 more conservative, 0 the "
                        "most likely character every step)")
    p.add_argument("--seed", type=int, default=0, help="seed of the draws (default 0)")
    p.add_argument("--batch", type=int, default=1, metavar="B", help="draw B texts at once (default 1)")
    p.add_argument("--network", metavar="NAME", help="the network to sample (default: the first)")
    p.add_argument("--loss", metavar="LAYER", help="the classifier loss whose scores are sampled (default: the one)")
    p.add_argument("--dtype", choices=("f64", "f32"), default="f64", help="the reference executor's dtype")
    p.add_argument("-o", "--output", default="-", metavar="OUT.txt", help="where to write (default: stdout)")
    p.add_argument("--werror", action="store_true", help="treat warnings as errors")
    _singa_version(p)


def _parser_export(sub):
    """`netc export`'s arguments."""
    p = sub.add_parser("export", help="write the network as Paleo JSON, a SINGA v0.3 job.conf or a Brainstorm layout")
    _common(p)
    p.add_argument("--format", required=True, choices=("paleo", "singa", "layout", "hub-layout", "onnx"),
                   help="the format to write (hub-layout: a Brainstorm architecture's layout as Brainstorm writes it; "
                        "onnx: an inference model with its parameters, needs the onnx package)")
    p.add_argument("-o", "--output", default="-", metavar="OUT", help="where to write (default: stdout)")
    p.add_argument("--params", metavar="P.npz|P.safetensors",
                   help="onnx: the parameters to write (default: the random ones `netc run` draws for --seed)")
    p.add_argument("--seed", type=int, default=0, help="onnx: the seed of the random parameters (default 0)")


def _parser_compile(sub):
    """`netc compile`'s arguments."""
    p = sub.add_parser("compile", help="compile a network to a shared library (fused Triton kernels + C launcher)")
    _common(p)
    p.set_defaults(phase="test", batch=None)   # a Brainstorm file's B (default 1); other formats: rescaled to B
    for a in p._actions:
        if a.dest == "batch":
            a.help = ("compile at batch B: every input's first axis becomes B (a Brainstorm file's B, default 1); "
                      "default: the file's batch")
    p.add_argument("-o", "--output", required=True, metavar="NET.so",
                   help="the shared library to write (and NET.h); --target interp: a manifest .json or a directory")
    p.add_argument("--target", choices=("cuda", "interp"), default="cuda")
    p.add_argument("--arch", choices=("sm_90", "sm_80"), default="sm_90")
    _precision(p, "compile floating tensors and parameters in f32, bf16 or fp16 (default: as the file "
                  "declares them)")
    p.add_argument("--params", metavar="P.npz|P.safetensors",
                   help="embed these parameters in NET.so (every one, by name; see the manifest), so that it needs "
                        "no netc_set_params; with --embed-params, missing ones are random")
    p.add_argument("--embed-params", action="store_true",
                   help="embed parameters in NET.so: random ones from --seed (as `netc run --reference` draws them) "
                        "for every parameter --params does not give")
    p.add_argument("--seed", type=int, default=0, help="seed of the random parameters of --embed-params (default 0)")
    p.add_argument("--opaque-as-identity", action="store_true",
                   help="compile layers of unknown type (opaque pass-throughs, Paleo's Generic layers) as the "
                        "identity, with a warning naming them (zero-copy where the memory plan can alias)")
    p.add_argument("--tuning", metavar="FILE.json",
                   help="compile with the tile sizes, warps and stages of this tuning file (written by --autotune on a "
                        "GPU; works on a machine without one); with --autotune, the file to write (default: "
                        "NET.tuning.json beside the .so)")
    p.add_argument("--autotune", action="store_true",
                   help="on this machine's GPU: time every kernel over tile sizes, warps and stages, keep the winners "
                        "in the tuning file and compile with them")
    p.add_argument("--emit", nargs=2, action="append", default=[], metavar=("WHAT", "DIR"),
                   help="also write intermediate code: `--emit triton DIR` writes the Triton source of every kernel")
    p.add_argument("--workers", dest="partition_workers", type=int, default=None, metavar="K",
                   help="partition the network over K workers and compile each rank's program (forward, or with "
                        "--train its training step) to its own library, NET.rank<r>.so beside NET.so: its schedule in "
                        "segments between its communication ops (netc_run_segment; docs/partitioning.md)")
    _training(p)
    for a in p._actions:
        if a.dest == "train":
            a.help = ("a training library: the training step (backward and optimizer passes, planned for training) "
                      "as netc_train_step, beside netc_forward on the same parameters; netc_get_params/"
                      "netc_set_params hold the optimizer state too (docs/training.md)")

def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="netc", description="netc: a compiler toolchain for neural networks")
    ap.add_argument("--version", action="version", version=f"netc {__version__}")
    sub = ap.add_subparsers(dest="cmd", metavar="COMMAND")
    sub.required = True
    for add in (_parser_check, _parser_opt, _parser_explain, _parser_import, _parser_run, _parser_sample,
                _parser_export, _parser_compile):
        add(sub)
    return ap


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    args = build_parser().parse_args(argv)
    args.argv = list(argv)    # `run --workers K` starts K processes with the same arguments
    diag = DiagnosticEngine(werror=getattr(args, "werror", False))
    try:
        if args.cmd in ("opt", "explain") and args.output != "-":
            try:
                sink = open(args.output, "w")
            except OSError as e:
                raise NetcError(f"cannot write '{args.output}': {e.strerror}") from None
            with sink, contextlib.redirect_stdout(sink):
                rc = COMMANDS[args.cmd](args, diag)
        else:
            rc = COMMANDS[args.cmd](args, diag)
        diag.flush()
        return rc
    except NetcError as e:
        known = {id(d) for d in diag.diagnostics}
        diag.extend([d for d in e.diagnostics if id(d) not in known])
        diag.flush()
        return EXIT_USER
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        return 0
    except Exception:  # noqa: BLE001 - anything else is netc's own bug
        diag.flush()
        sys.stderr.write("netc: internal error: this is a bug in netc, not in your network. "
                         "Please report it with the input file.\n")
        if os.environ.get("NETC_DEBUG"):
            traceback.print_exc()
        else:
            etype, evalue, _ = sys.exc_info()
            sys.stderr.write(f"  {etype.__name__}: {evalue}\n  (set NETC_DEBUG=1 for the traceback)\n")
        return EXIT_INTERNAL


def cmd_check(args, diag):
    from .runtime import flags as F
    from .pipelines import program
    from .frontend.layout_files import layout_text
    text = layout_text(args.file)
    if text is not None:
        return _check_layout(args, diag, text)
    module = F.load_source(args, diag)
    program(module, F.pipeline_options(args, training=True), diag)
    return 0


def cmd_opt(args, diag):
    from .runtime import flags as F
    from .ir.printer import print_ir
    from .passes.manager import DEFAULT_PIPELINE, PASSES
    from .pipelines import custom
    if args.list_passes:
        for n in DEFAULT_PIPELINE:
            print(f"  {n:24s} {PASSES[n].summary}")
        print("then, on request (-p, or --train for the training passes):")
        for n in sorted(set(PASSES) - set(DEFAULT_PIPELINE)):
            print(f"  {n:24s} {PASSES[n].summary}")
        return 0
    module = F.load_source(args, diag)
    names = [n.strip() for n in args.passes.split(",") if n.strip()] if args.passes is not None else DEFAULT_PIPELINE
    after = {n.strip() for a in args.print_ir_after for n in a.split(",") if n.strip()}
    options = F.pipeline_options(args, training=True, listed=names)
    options = dataclasses.replace(options, precision=F.precision_options(args))
    pm, ctx = custom(names, options, diag, train=args.train, print_after_all=args.print_ir_after_all,
                     print_after=after)
    try:
        pm.run(module, ctx)
    finally:
        if args.timing:
            sys.stderr.write(pm.timing_report())
    if not args.print_ir_after_all and not after:
        sys.stdout.write(print_ir(module, with_locs=not args.no_locs))
    return 0




def _per_worker(args, diag):
    """explain --workers: one integer K on a network that says how to distribute it (partition_dim,
    location, parallel splits, a SINGA job) asks for the per-worker report (the network on K workers,
    one program per rank); a list, or a network without such annotations, for Paleo's data-parallel
    scaling table (with --device). Returns the loaded module in the first case, else None."""
    from .runtime import flags as F
    if args.workers is None or not args.workers.strip().isdigit():
        return None
    from .passes.partition import has_partitioning
    module = F.load_source(args, diag)
    if not has_partitioning(module):
        return None
    args.partition_workers = int(args.workers)
    args.workers = None
    args.comm_network, args.network = args.network, None   # the network between workers, not Paleo's table's
    return module


def cmd_explain(args, diag):
    from .runtime import flags as F
    from .runtime.build import rescale
    from .explain import calibrated_timing, timing_of, verify_plans, write_dot, write_plan_files, write_report
    from .pipelines import Plan, explain
    args.partition_workers = args.comm_network = None
    module = _per_worker(args, diag)
    timing = calibrated_timing(timing_of(args), args, diag)
    if args.comm_network is not None:
        from .costmodel import get_network
        get_network(args.comm_network)
    module = module or F.load_source(args, diag)
    rescale(module, args)
    if _layout_kind(args) == "hub":      # Brainstorm's own layout; netc's plan is --layout-kind plan
        _write_hub_layout(args.file, args.layout, diag)
        args.layout = None
    show_ir = args.format == "text" and not args.brief and args.dot is None
    want_plan = args.memory or args.layout or (args.plot and not args.workers) or args.verify \
        or args.memory_budget is not None
    # the layout format cannot express strided (channel-concat) slices nor fused intermediates
    # (one array per layer output): plan contiguous slices, op by op, then
    plan = Plan(reuse=not args.no_reuse,
                **({"concat": "contiguous", "fusion": "none", "time_sized": True} if args.layout else {}))
    # --dot draws fusion groups: the fuse pass marks them (it only annotates, the table is unchanged)
    ctx = explain(module, F.pipeline_options(args, training=True), diag, split_workers=bool(args.partition_workers),
                  fuse=args.dot is not None, budget=args.memory_budget, plan=plan if want_plan else None,
                  print_after_all=show_ir)
    plans = ctx.notes.get("memory_plan", {})
    if args.verify:
        verify_plans(module, plans)
    if args.layout or (args.plot and not args.workers):
        write_plan_files(args, plans)
    if args.dot is not None:
        write_dot(module, args.dot, workers=bool(args.partition_workers))
        return 0
    return write_report(args, module, timing, plans, lambda b: _module_at_batch(args, b))


def _layout_kind(args):
    """What `explain --layout` writes: 'hub' (Brainstorm's create_layout of a Brainstorm architecture: the default
    for one), 'plan' (netc's memory plan in the March-2015 format: the default for any other file); None without
    --layout."""
    if args.layout is None:
        if args.layout_kind is not None:
            raise NetcError("--layout-kind says what --layout writes: give --layout OUT.json too")
        return None
    if args.layout_kind is not None:
        return args.layout_kind
    import json
    from .frontend import detect_format, read_source
    from .frontend.brainstorm import is_brainstorm
    text = read_source(args.file)
    if detect_format(args.file, text) != "json":
        return "plan"
    try:
        return "hub" if is_brainstorm(json.loads(text)) else "plan"
    except ValueError:
        return "plan"


def _write_hub_layout(path, out, diag):
    """Brainstorm's layout of the architecture in `path` (netc/export: export_hub_layout) into `out`."""
    import json
    from .diagnostics import Loc
    from .export import export_hub_layout
    from .frontend import detect_format, read_source
    from .frontend.brainstorm import is_brainstorm
    text = read_source(path)
    if detect_format(path, text) != "json" or not is_brainstorm(json.loads(text)):
        raise NetcError("--layout-kind hub writes Brainstorm's layout of a Brainstorm architecture; this file is not "
                        "one (--layout-kind plan writes netc's memory plan as a layout)", Loc(path, 1, 1))
    doc = json.loads(export_hub_layout(path, diag))
    doc["generated_by"] = doc["generated_by"].replace("export --format hub-layout", "explain --layout")
    with open(out, "w") as f:
        json.dump(doc, f, indent=1)
        f.write("\n")
    sys.stderr.write(f"wrote {out} (Brainstorm's layout of the architecture; --layout-kind plan: netc's plan)\n")


def _module_at_batch(args, batch: int):
    """The source again, every input at `batch`, through the inference pipeline (strong scaling)."""
    from .runtime import flags as F
    from .pipelines import inference
    from .runtime.scale import scale_inputs
    diag = DiagnosticEngine()
    module = F.load_source(args, diag)
    scale_inputs(module, batch=batch)
    inference(module, F.pipeline_options(args), diag)
    if diag.has_errors():
        raise NetcError([d for d in diag.diagnostics if d.severity == "error"][:1] or diag.diagnostics[:1])
    return module


def _check_layout(args, diag, text):
    """`netc check`/`import` on a Brainstorm layout (frontend/layout_files.py); a hub layout wrapped with
    its architecture: the architecture checked too."""
    from .frontend.layout_files import check_layout_file
    report, wrapped = check_layout_file(args.file, text, diag)
    if wrapped:
        from .frontend import load_text
        from .pipelines import Options, inference
        module = load_text(text, args.file, diag, getattr(args, "batch", 1) or 1)
        if module is not None:
            inference(module, Options(phase=getattr(args, "phase", "train")), diag)
    sys.stdout.write(report)
    return 0


def cmd_import(args, diag):
    from .runtime import flags as F
    from .frontend.nd_writer import write_nd
    from .frontend.layout_files import layout_text
    text = layout_text(args.file)
    if text is not None and '"architecture"' not in text:  # with one, import the Brainstorm architecture
        return _check_layout(args, diag, text)
    module = F.load_source(args, diag)
    if diag.has_errors():
        raise NetcError(diag.diagnostics[:])
    header = f"Imported from {os.path.basename(args.file)} by `netc import`."
    titles = [n.attrs["title"] for n in module.networks() if n.attrs.get("title")]
    if titles:
        header += "\n" + "\n".join(titles)
    text = write_nd(module, header=header)
    rc = _emit(text, args.output)
    if module.attrs.get("onnx_source"):       # an ONNX model's values: beside the .nd, as netc run takes them
        from .frontend.onnx import write_params_beside
        write_params_beside(module.attrs["onnx_source"], args.output, diag)
    return rc


def _emit(text: str, output: str) -> int:
    """Write a command's result to `output`, or to stdout for '-'."""
    if output == "-":
        sys.stdout.write(text)
    else:
        with open(output, "w") as f:
            f.write(text)
    return 0


def cmd_run(args, diag):
    from .runtime import flags as F
    from .runtime import workers as W
    from .runtime import run as R
    from .runtime import params as P
    import torch
    from .pipelines import inference
    from .runtime import run_module
    from .runtime.native import is_compiled
    F.check_profile_flags(args)
    R.check_state_flags(args, is_compiled(args.file))
    if is_compiled(args.file):
        for flag in ("spatial", "opaque_as_identity", "interp_blocks", "tuning"):
            if getattr(args, flag):
                raise NetcError(f"--{flag.replace('_', '-')} applies to a network source, not to a compiled NET.so "
                                f"(its shapes and kernels are fixed)")
        return _run_compiled(args)
    if args.tuning and (args.train or args.check_grads or (args.partition_workers or 1) > 1):
        raise NetcError("--tuning runs a forward on the interpreter target with a tuning file's configurations; "
                        "training steps and ranks run with the default tiles")
    if (args.partition_workers or 1) > 1:
        return W.run_workers(args, diag)
    for flag, v in (("--timeout", args.timeout), ("--comm-log", args.comm_log)):
        if v is not None:
            raise NetcError(f"{flag} applies to a run on several workers (--workers K, K > 1)")
    if args.profile:
        stem = os.path.splitext(os.path.basename(args.file))[0]
        raise NetcError(f"--profile times the kernel launches of a compiled network, and '{args.file}' is a network "
                        f"source: compile it first (netc compile {args.file} -o {stem}.so) and run "
                        f"`netc run {stem}.so --profile`")
    if args.train or args.check_grads:
        return R.train_source(args, diag)
    F.no_training_flags(args)
    target = F.run_target(args)     # no --target: the CPU target, or the reference where a flag needs it
    if target == "cuda":
        raise NetcError("--target cuda runs the ranks of --workers K; a single network runs on the GPU compiled: "
                        "netc compile FILE -o NET.so, then netc run NET.so")
    if args.reference and target != "reference":
        raise NetcError(f"--reference and --target {target} contradict each other; give one")
    if args.compare and target not in ("interp", "cpu"):
        raise NetcError("--compare needs --target interp or cpu")
    if args.interp_blocks and target != "interp":
        raise NetcError("--interp-blocks needs --target interp")
    if args.tuning and target != "interp":
        raise NetcError("--tuning runs the kernels with a tuning file's configurations: it needs --target interp")
    if args.tuning and args.interp_blocks == "large":
        raise NetcError("--tuning and --interp-blocks large both choose the tiles: give one")
    ref_dtype, precision = F.run_dtypes(args, target)
    if target == "interp":
        # before anything imports netc.kernels: the interpreter mode is fixed at import
        from .runtime.interp import ensure_interpreter
        ensure_interpreter()
    module = F.load_network(args, diag)
    scaled = R.scale_for_run(module, args, F.load_source)
    try:
        inference(module, F.pipeline_options(args), diag)
    except NetcError as e:
        errors = [d for d in e.diagnostics if d.severity == "error"]
        if scaled and errors:
            errors[0].note(f"the inputs were scaled ({scaled}) before shape inference")
        raise
    if R.reference_for_comm_ops(args, module, target) != target:
        target, (ref_dtype, precision) = "reference", F.run_dtypes(args, "reference")
    inputs = R.given_inputs(args)
    from .runtime.params import read_params
    params = read_params(args.params, "--params") if args.params else None
    if params:
        params = P.params_for_run(module, params, args.params, diag)
    failed = []
    if target == "interp":
        outs, failed = R.run_interp(module, args, inputs or None, params, precision)
    elif target == "cpu":     # its --dtype/--tf32 refused by run_dtypes, --state-in/out by check_state_flags
        R.warn_opaque_pass_through(module, diag, "the CPU target")
        outs, failed = R.run_cpu(module, args, inputs or None, params)
    else:
        R.warn_opaque_pass_through(module, diag)
        dtype = torch.float32 if ref_dtype == "f32" else torch.float64
        if args.state_in or args.state_out:
            outs = R.run_carrying_state(module, args, inputs, params, dtype)
        else:
            outs = run_module(module, inputs or None, params, network=args.network, seed=args.seed, dtype=dtype)
    return R.print_outputs(args, outs, failed)


def _run_compiled(args):
    """`netc run NET.so`: the compiled network on the GPU (runtime.native.run_cli); with --profile,
    its launches timed beside the cost model (netc.profile); with --train, a training library's steps."""
    from .runtime import flags as F
    from .runtime import run as R
    if args.train:
        return R.train_library(args)
    if args.check_grads:
        raise NetcError("--check-grads checks the generated gradient ops of a network source against autograd "
                        "(netc run FILE --check-grads); a compiled library's steps are checked by --train --compare")
    F.no_training_flags(args)
    if args.profile:
        if args.compare:
            raise NetcError("--profile times the network and --compare checks its outputs: run them separately")
        if args.output:
            raise NetcError("--profile prints timings, not outputs: -o/--output has nothing to write (the profile "
                            "goes to --profile-out PROF.json)")
        from .profile import run_profile
        return run_profile(args)
    from .runtime.native import run_cli
    outs, failed = run_cli(args)
    return R.print_outputs(args, outs, failed)


def cmd_sample(args, diag):
    import torch
    from .runtime.sample import sample_text
    texts = sample_text(args.file, args.params, args.vocab, args.prime, args.length, args.temperature, args.seed,
                        args.batch, args.network, args.loss, torch.float32 if args.dtype == "f32" else torch.float64,
                        options={"singa_version": getattr(args, "singa_version", None)})
    return _emit("\n\n".join(texts) + "\n", args.output)


def cmd_export(args, diag):
    from .export import export
    from .runtime.flags import load_options
    if args.format == "onnx":
        return _export_onnx(args, diag)
    if args.params:
        raise NetcError("--params goes with --format onnx (the other formats carry no parameter values)")
    text = export(args.file, args.format, diag, getattr(args, "batch", 1), args.phase, options=load_options(args))
    return _emit(text, args.output)


def _export_onnx(args, diag):
    """`netc export --format onnx`: the network at phase test (its inference form), parameters included."""
    from .export.onnx import export_onnx, need_onnx
    from .pipelines import Options, inference
    from .runtime import flags as F
    need_onnx()                                   # before any work: say how to install it
    if args.output == "-" and sys.stdout.isatty():
        raise NetcError("an ONNX model is binary: write it to a file with -o MODEL.onnx")
    module = F.load_source(args, diag)
    inference(module, Options(phase="test"), diag)
    if diag.has_errors():
        raise NetcError(diag.diagnostics[:])
    params = None
    if args.params:
        from .runtime.params import read_params
        params = read_params(args.params, "--params")
    data = export_onnx(module, params=params, seed=args.seed, warn=lambda m: diag.warning(m))
    if args.output == "-":
        sys.stdout.buffer.write(data)
    else:
        with open(args.output, "wb") as f:
            f.write(data)
    return 0


def cmd_compile(args, diag):
    from .runtime.build import compile_from_args
    return compile_from_args(args, diag)








COMMANDS = {"export": cmd_export, "check": cmd_check, "opt": cmd_opt, "explain": cmd_explain, "import": cmd_import, "run": cmd_run, "compile": cmd_compile,
            "sample": cmd_sample}


if __name__ == "__main__":
    sys.exit(main())
