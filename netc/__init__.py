"""netc: a compiler toolchain for neural networks."""
__version__ = "0.1.0"
