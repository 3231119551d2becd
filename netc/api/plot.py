"""Cost curves as pictures (matplotlib: the `plot` extra, pip install 'netc[plot]').

    plot = netc.plot.CostPlot("cost.png")          # an event handler: EndIteration costs, written at
    netc.train(..., event_handler=[plot, ...])     # EndTraining (and whenever plot.save() is called)

    p = netc.plot.Ploter("train cost", "test cost")  # PaddlePaddle's Ploter: curves by title
    p.append("train cost", step, cost); p.plot("curves.png")
"""
from __future__ import annotations

from . import event as ev
from .errors import error, user_loc


def _pyplot():
    try:
        import matplotlib
    except ImportError:
        raise error("netc.plot draws with matplotlib, which is not installed: pip install 'netc[plot]' "
                    "(or pip install matplotlib)", user_loc()) from None
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    return plt


class Ploter:
    """Curves by title: append(title, step, value), then plot(path) (PNG, SVG or PDF by the extension)."""

    def __init__(self, *titles: str, ylabel: str = "cost", logy: bool | None = None):
        self.curves = {t: ([], []) for t in titles}
        self.ylabel, self.logy = ylabel, logy

    def append(self, title: str, step, value) -> None:
        xs, ys = self.curves.setdefault(title, ([], []))
        xs.append(step)
        ys.append(float(value))

    def reset(self) -> None:
        for xs, ys in self.curves.values():
            xs.clear()
            ys.clear()

    def plot(self, path: str, title: str = "") -> str:
        if not str(path).lower().endswith((".png", ".svg", ".pdf")):
            raise error(f"plot writes PNG, SVG or PDF (by the extension), got '{path}'", user_loc())
        plt = _pyplot()
        fig, ax = plt.subplots(figsize=(8, 4.5))
        values = []
        for t, (xs, ys) in self.curves.items():
            if xs:
                ax.plot(xs, ys, label=t, lw=1.2)
                values.extend(ys)
        logy = self.logy if self.logy is not None else bool(values) and min(values) > 0
        ax.set_yscale("log" if logy else "linear")
        ax.set_xlabel("iteration")
        ax.set_ylabel(self.ylabel)
        ax.grid(alpha=0.3)
        if title:
            ax.set_title(title)
        if len(self.curves) > 1 or title:
            ax.legend(loc="upper right")
        fig.tight_layout()
        try:
            fig.savefig(path)
        except OSError as e:
            raise error(f"cannot write '{path}': {e.strerror}", user_loc()) from None
        finally:
            plt.close(fig)
        return path


class CostPlot:
    """An event handler drawing the training cost per iteration (and the mean cost per pass): collects
    EndIteration / EndPass events and writes `path` at EndTraining."""

    def __init__(self, path: str, title: str = "training cost"):
        _pyplot()                       # say now, not after training, when matplotlib is missing
        self.path, self.title = path, title
        self.ploter = Ploter("cost per iteration", "mean cost per pass")
        self.iteration = 0

    def __call__(self, e) -> None:
        if isinstance(e, ev.EndIteration):
            self.iteration += 1
            self.ploter.append("cost per iteration", self.iteration, e.cost)
        elif isinstance(e, ev.EndPass):
            self.ploter.append("mean cost per pass", self.iteration, e.cost)
        elif isinstance(e, ev.EndTraining):
            self.save()

    def save(self) -> str:
        return self.ploter.plot(self.path, self.title)


def plot_cost(costs, path: str, title: str = "training cost") -> str:
    """A list of costs (one per iteration) as a curve in `path`."""
    p = Ploter("cost")
    for i, c in enumerate(costs, 1):
        p.append("cost", i, c)
    return p.plot(path, title)


__all__ = ["Ploter", "CostPlot", "plot_cost"]
