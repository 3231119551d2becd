"""netc: a compiler toolchain for neural networks.

Layers, bottom to top; a module imports its own layer and the ones below, never one above
(tests/test_layering.py checks every import, those inside functions too, and that no imports
form a cycle; an import inside a function exists only to keep startup fast, as torch, Triton and
matplotlib load slowly):

    diagnostics                        locations, errors, rendering
    ir                                 the IR, its text (printer, parser), verifier, dialect registry
    ops                                one definition per op; window geometry; float64 reference semantics
    frontend                           .nd, Paleo JSON, SINGA configs, Brainstorm layouts -> IR
    memory                             the static memory plan and its verifier
    passes                             one pass per file, the pass manager
    kernels                            Triton kernels and their launchers; AOT compilation
    codegen                            lowering, tuning, the C launcher, the .so
    runtime                            the reference executor, the .so from Python, the interpreter target
    costmodel, explain, export, profile   reports, Paleo's model, writers, profiles
    cli                                the `netc` command
"""
__version__ = "0.1.0"
