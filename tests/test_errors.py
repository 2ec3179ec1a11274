"""Every exception class of reactccl derives from ReactcclError and keeps its built-in base."""

import importlib
import inspect
import pkgutil

import pytest

import reactccl
from reactccl.errors import ReactcclError

# modules that need an optional dependency (torch, ns-3) are skipped where it is missing
OPTIONAL = ("torch", "ns")
SCRIPTS = {"reactccl.__main__"}   # running it is the CLI, not an import


def _modules():
    for info in pkgutil.walk_packages(reactccl.__path__, "reactccl."):
        if info.name in SCRIPTS:
            continue
        try:
            yield importlib.import_module(info.name)
        except ImportError as e:
            if (e.name or "").split(".")[0] not in OPTIONAL:
                raise


def _error_classes():
    found = {}
    for mod in _modules():
        for obj in vars(mod).values():
            if inspect.isclass(obj) and issubclass(obj, BaseException) and obj.__module__.startswith("reactccl"):
                found[f"{obj.__module__}.{obj.__qualname__}"] = obj
    return found


def test_every_error_class_derives_from_reactccl_error():
    found = _error_classes()
    assert len(found) >= 15          # the walk did import the package (19 classes when torch is installed)
    outside = sorted(name for name, cls in found.items() if not issubclass(cls, ReactcclError))
    assert outside == []


@pytest.mark.parametrize("name, base", [
    ("reactccl.pattern.PatternError", ValueError), ("reactccl.pattern.VerificationError", ValueError),
    ("reactccl.topology.TopologyError", ValueError), ("reactccl.topology.UnitError", ValueError),
    ("reactccl.traffic.BackgroundError", ValueError), ("reactccl.netsim.SimulationError", RuntimeError),
    ("reactccl.tuner.TunerError", RuntimeError), ("reactccl.packetsim.PacketSimError", RuntimeError),
    ("reactccl.packetsim.PacketSimUnavailable", ImportError), ("reactccl.testbed.TestbedError", RuntimeError),
    ("reactccl.testbed.TestbedConfigError", ValueError),
])
def test_error_classes_keep_their_builtin_base(name, base):
    mod, _, cls = name.rpartition(".")
    err = getattr(importlib.import_module(mod), cls)
    assert issubclass(err, base) and issubclass(err, ReactcclError)


def test_a_bad_input_is_caught_as_reactccl_error_and_as_value_error():
    from reactccl.algorithms import generate

    with pytest.raises(ReactcclError) as got:
        generate("ring", 0)
    assert isinstance(got.value, ValueError)
