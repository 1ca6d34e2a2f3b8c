"""A second device on a CPU-only machine: catch a tensor left on the wrong device without a GPU.

A notebook that runs on the CPU proves nothing about CUDA: every tensor is on the one device there.
On a GPU, a tensor created without ``device=`` (``torch.arange(T)``, data loaded with
``torch.tensor``) and used with the model's CUDA weights raises "Expected all tensors to be on the
same device". :class:`DeviceAudit` reproduces that on the CPU, with real values (so a whole
notebook runs, prints and plots as usual):

* inside it ``torch.cuda.is_available()`` is True, so the notebook picks ``device = "cuda"``;
* every tensor carries a virtual device: "cuda" for what ``.to("cuda")``, ``.cuda()``,
  ``Module.to("cuda")`` or ``device="cuda"`` made (the data stay on the CPU, the request is
  recorded), "cpu" for what a factory made without a device (or ``.cpu()``, ``.to("cpu")``); the
  result of an operation carries its inputs' device; ``t.device`` and ``t.is_cuda`` report it;
* an operation whose tensor inputs hold both devices raises RuntimeError, as CUDA would. As on
  CUDA, a 0-dim CPU tensor mixes with anything, indexing a CUDA tensor with CPU indices and
  copying between devices are allowed, and a tensor the audit never saw made (a ``.grad``) is
  compatible with both.

It is a model of CUDA's device rule, not CUDA: it cannot find a kernel that CUDA lacks, or a
speed or memory problem; tests/benchmarks/gpu_smoke.py on a real GPU does that.
"""
from __future__ import annotations

import contextlib
import weakref

import torch
from torch.overrides import TorchFunctionMode

CUDA, CPU = "cuda", "cpu"
_FAKE = torch.device("cuda", 0)  # what t.device says of a tensor on the virtual GPU
# operations that may take tensors of both devices on a real GPU
_MIXED_OK = {torch.Tensor.__getitem__, torch.Tensor.__setitem__, torch.Tensor.copy_, torch.Tensor.index_put_}
_MOVES = {torch.Tensor.to, torch.Tensor.cuda, torch.Tensor.cpu, torch.Tensor.type_as, torch.Tensor.new_tensor,
          torch.Tensor.new_zeros, torch.Tensor.new_ones, torch.Tensor.new_empty, torch.Tensor.new_full}


def _wanted(dev) -> str | None:
    """'cuda', 'cpu' or None (no device asked for) from a device argument."""
    if dev is None:
        return None
    if isinstance(dev, int):
        return CUDA
    return CUDA if torch.device(dev).type == "cuda" else CPU


def _tensors(obj, out):
    if isinstance(obj, torch.Tensor):
        out.append(obj)
    elif isinstance(obj, (list, tuple)):
        for x in obj:
            _tensors(x, out)
    elif isinstance(obj, dict):
        for x in obj.values():
            _tensors(x, out)
    return out


class _WhereMap:
    """tensor -> virtual device, by identity (a WeakKeyDictionary compares tensors with ==), forgotten
    when the tensor is collected."""

    def __init__(self):
        self._data: dict[int, tuple] = {}

    def get(self, t, default=None):
        entry = self._data.get(id(t))
        return entry[1] if entry is not None and entry[0]() is t else default

    def __setitem__(self, t, dev):
        key = id(t)
        self._data[key] = (weakref.ref(t, lambda _r, key=key, data=self._data: data.pop(key, None)), dev)


class DeviceAudit(TorchFunctionMode):
    """Run torch code as if a CUDA GPU held what it moves there (see the module's docstring)."""

    def __init__(self):
        super().__init__()
        self.where = _WhereMap()
        self._stack = contextlib.ExitStack()

    # ------------------------------------------------------------------ the virtual device of a tensor
    def _mark(self, obj, dev: str | None) -> None:
        if dev is None:
            return
        for t in _tensors(obj, []):
            self.where[t] = dev

    def _devices(self, args, kwargs) -> set[str]:
        seen = set()
        for t in _tensors((args, kwargs), []):
            dev = self.where.get(t)
            if dev is None or (dev == CPU and t.dim() == 0):
                continue  # unknown, or a CPU scalar: both mix with anything on CUDA
            seen.add(dev)
        return seen

    # ------------------------------------------------------------------ the mode
    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = dict(kwargs or {})
        name = getattr(func, "__name__", "")
        if name == "__get__":  # a property: t.device, t.is_cuda
            owner = getattr(func, "__self__", None)
            prop = getattr(owner, "__name__", "") if owner is not None else ""
            value = func(*args, **kwargs)
            if args and isinstance(args[0], torch.Tensor) and self.where.get(args[0]) == CUDA:
                if prop == "device":
                    return _FAKE
                if prop == "is_cuda":
                    return True
            return value
        asked = None
        if "device" in kwargs:
            asked = _wanted(kwargs["device"])
            if asked == CUDA:
                kwargs["device"] = "cpu"
        if func in _MOVES:
            return self._move(func, args, kwargs, asked)
        devices = self._devices(args, kwargs)
        if len(devices) > 1 and func not in _MIXED_OK:
            raise RuntimeError(f"Expected all tensors to be on the same device, but found at least two devices, "
                               f"cuda:0 and cpu! (device audit: {name or func} on the CPU-only test machine, "
                               "where a CUDA GPU would have raised this)")
        out = func(*args, **kwargs)
        if asked is not None:
            self._mark(out, asked)
        elif func in _MIXED_OK:
            self._mark(out, self.where.get(args[0]) if args and isinstance(args[0], torch.Tensor) else None)
        elif devices:
            self._mark(out, devices.pop())
        elif not _tensors((args, kwargs), []):
            self._mark(out, CPU)  # a factory without a device: the CPU, as on a GPU machine
        return out

    def _move(self, func, args, kwargs, asked):
        self_t = args[0]
        rest = list(args[1:])
        if func is torch.Tensor.cuda:  # the same as .to("cuda")
            func, rest, kwargs = torch.Tensor.to, ["cuda"], {k: v for k, v in kwargs.items() if k == "non_blocking"}
        if func is torch.Tensor.cpu:
            out = self_t.view_as(self_t) if self.where.get(self_t) == CUDA else self_t
            self.where[out] = CPU
            return out
        if func is torch.Tensor.to:
            target = asked
            for i, a in enumerate(rest):
                if isinstance(a, torch.Tensor):
                    target = self.where.get(a)
                elif isinstance(a, (str, torch.device, int)) and not isinstance(a, bool):
                    target = _wanted(a)
                    rest[i] = "cpu" if target == CUDA else a
            out = func(self_t, *rest, **kwargs)
            if target == CUDA:
                if out is self_t and self.where.get(self_t) != CUDA and self_t.dim() > 0 and \
                        not isinstance(self_t, torch.nn.Parameter):
                    out = self_t.view_as(self_t)  # the moved copy is a new tensor; the original stays on the CPU
                self.where[out] = CUDA
            elif target == CPU:
                if out is self_t and self.where.get(self_t) == CUDA:
                    out = self_t.view_as(self_t)
                self.where[out] = CPU
            else:
                self._mark(out, self.where.get(self_t))
            return out
        out = func(self_t, *rest, **kwargs)  # type_as, new_*: the other tensor's or self's device
        if asked is not None:
            self._mark(out, asked)
        elif func is torch.Tensor.type_as and rest and isinstance(rest[0], torch.Tensor):
            self._mark(out, self.where.get(rest[0]))
        else:
            self._mark(out, self.where.get(self_t))
        return out

    # ------------------------------------------------------------------ entering: CUDA "available"
    def __enter__(self):
        patches = {"is_available": lambda: True, "device_count": lambda: 1,
                   "get_device_name": lambda *a, **k: "device audit (CPU)",
                   "manual_seed": lambda *a, **k: None, "manual_seed_all": lambda *a, **k: None,
                   "synchronize": lambda *a, **k: None, "empty_cache": lambda *a, **k: None,
                   "max_memory_allocated": lambda *a, **k: 0, "memory_allocated": lambda *a, **k: 0,
                   "reset_peak_memory_stats": lambda *a, **k: None,
                   # torch.random.fork_rng saves and restores the GPU's generator too
                   "get_rng_state": lambda *a, **k: torch.get_rng_state(),
                   "set_rng_state": lambda *a, **k: None, "get_rng_state_all": lambda *a, **k: [torch.get_rng_state()],
                   "set_rng_state_all": lambda *a, **k: None, "current_device": lambda: 0,
                   "is_initialized": lambda: True}
        for attr, fn in patches.items():
            self._stack.enter_context(_patched(torch.cuda, attr, fn))
        return super().__enter__()  # Module.to and .cuda move each tensor with Tensor.to/.cuda: seen here

    def __exit__(self, *exc):
        try:
            return super().__exit__(*exc)
        finally:
            self._stack.close()


@contextlib.contextmanager
def _patched(owner, attr, value):
    old = getattr(owner, attr)
    setattr(owner, attr, value)
    try:
        yield
    finally:
        setattr(owner, attr, old)
