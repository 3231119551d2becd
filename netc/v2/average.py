"""PaddlePaddle's model average (paddle.optimizer.ModelAverage, the C++ AverageOptimizer of
paddle/parameter/AverageOptimizer.{h,cpp}) for netc.v2's trainer: the average of a parameter's values
after its recent updates, which PaddlePaddle's v2 trainer writes in save_parameter_to_tar (apply, write,
restore) while training goes on with the raw values.

The window rule, counted in updates (batches):

    every update:  num_updates += 1; num_accumulates += 1; sum += the updated values
                   if num_accumulates >= min_window and
                      num_accumulates >= min(max_window, num_updates * average_window):
                       old_sum = sum; sum = 0; old_num_accumulates = num_accumulates; num_accumulates = 0
    every pass's end:  max_window = the pass's updates (unless max_average_window was given);
                       min_window = min(min_window, num_updates)
    average = (sum + old_sum) / (num_accumulates + old_num_accumulates)

min_window starts at min(10000, max_average_window) and max_window at max_average_window (2^63 - 1 when
not given). So the average covers the updates since the last window start and the window before it:
between average_window * num_updates and twice that many, bounded by the pass length. (PaddlePaddle
keeps `sum` in two buffers, moving one into the other every 16384 updates for precision: the same sum;
here the sums are float64.) Only the parameters training updates are averaged (not static ones, nor
netc.v2's fixed selections); batch norm's moving statistics are PaddlePaddle static parameters, not
averaged either."""
from __future__ import annotations

import torch

from ..api.errors import error, user_loc

INT64_MAX = 2 ** 63 - 1


class ModelAverage:
    """paddle.optimizer.ModelAverage(average_window, max_average_window=None, do_average_in_cpu=False): the
    `model_average=` of an optimizer. do_average_in_cpu is accepted (netc.v2 averages on the CPU)."""

    def __init__(self, average_window, max_average_window=None, do_average_in_cpu=False):
        loc = user_loc()
        if isinstance(average_window, bool) or not isinstance(average_window, (int, float)) or average_window <= 0:
            raise error(f"paddle.optimizer.ModelAverage: average_window is a positive number (a fraction of the "
                        f"updates so far), got {average_window!r}", loc)
        if max_average_window is not None and (isinstance(max_average_window, bool) or
                                               not isinstance(max_average_window, int) or max_average_window < 1):
            raise error(f"paddle.optimizer.ModelAverage: max_average_window is a positive integer (updates), got "
                        f"{max_average_window!r}", loc)
        self.average_window, self.max_average_window = float(average_window), max_average_window
        self.do_average_in_cpu = bool(do_average_in_cpu)


class Averager:
    """One trainer's average state (the AverageOptimizer's counters and sums) over netc tensors by name."""

    def __init__(self, conf: ModelAverage):
        self.conf = conf
        given = conf.max_average_window
        self.max_window = INT64_MAX if given is None else given
        self.min_window = min(10000, self.max_window)
        self.num_updates = self.prev_num_updates = self.num_accumulates = self.old_num_accumulates = 0
        self.sums: dict = {}        # netc name -> float64 sum since the window's start
        self.old: dict = {}         # netc name -> the previous window's sum
        self.backup: dict = {}

    def too_long(self) -> bool:
        return self.num_accumulates >= self.min_window and \
            self.num_accumulates >= min(self.max_window, self.num_updates * self.conf.average_window)

    def update(self, tensors: dict):
        """After one update (a batch): add the updated values, start a new window when this one is long."""
        self.num_updates += 1
        self.num_accumulates += 1
        for n, t in tensors.items():
            v = t.detach().to(torch.float64)
            self.sums[n] = self.sums[n] + v if n in self.sums else v.clone()
        if self.too_long():
            self.old = {n: s for n, s in self.sums.items()}
            self.sums = {n: torch.zeros_like(s) for n, s in self.sums.items()}
            self.old_num_accumulates, self.num_accumulates = self.num_accumulates, 0

    def finish_pass(self):
        if self.conf.max_average_window is None and self.num_updates > self.prev_num_updates:
            self.max_window = self.num_updates - self.prev_num_updates
            self.prev_num_updates = self.num_updates
        self.min_window = min(self.min_window, self.num_updates)

    def average(self, name):
        """The averaged values of one parameter (None before any update)."""
        count = self.num_accumulates + self.old_num_accumulates
        if count == 0 or name not in self.sums:
            return None
        total = self.sums[name] + self.old[name] if name in self.old else self.sums[name]
        return total / count

    def apply(self, tensors: dict):
        """Put the averages into the tensors, keeping their raw values for restore()."""
        for n, t in tensors.items():
            avg = self.average(n)
            if avg is not None:
                self.backup[n] = t.detach().clone()
                with torch.no_grad():
                    t.copy_(avg.to(t.dtype))

    def restore(self, tensors: dict):
        for n, raw in self.backup.items():
            with torch.no_grad():
                tensors[n].copy_(raw)
        self.backup = {}


__all__ = ["ModelAverage", "Averager", "INT64_MAX"]
