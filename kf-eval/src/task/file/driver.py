# KernelFoundry: runs a task file's Python reference in its own process.
#
#   python driver.py SCRIPT WORKDIR
#
# WORKDIR holds meta.json ({"sizes", "scalars", "inputs": [names], "outputs": [names]}) and
# in_<name>.npy for every input; this writes out_<name>.npy for every output the reference
# returns. Exit codes: 0 ok, 3 the script failed to load or raised, 4 NumPy is missing,
# 5 the result is not a dict of arrays.
import importlib.util
import json
import os
import sys
import traceback


def fail(code, message):
    sys.stderr.write(message.rstrip() + "\n")
    sys.exit(code)


try:
    import numpy as np
except ImportError as e:
    fail(4, f"NumPy is not installed for {sys.executable}: {e}")

script, workdir = sys.argv[1], sys.argv[2]
with open(os.path.join(workdir, "meta.json")) as f:
    meta = json.load(f)

try:
    spec = importlib.util.spec_from_file_location("kf_task_reference", script)
    module = importlib.util.module_from_spec(spec)
    sys.path.insert(0, os.path.dirname(os.path.abspath(script)))
    spec.loader.exec_module(module)
except BaseException:
    fail(3, "loading " + script + " failed:\n" + traceback.format_exc(limit=-3))

function = getattr(module, "reference", None)
if not callable(function):
    fail(3, f"{script} defines no function reference(inputs, sizes, scalars)")

inputs = {n: np.load(os.path.join(workdir, f"in_{n}.npy")) for n in meta["inputs"]}
for a in inputs.values():
    a.setflags(write=False)
try:
    result = function(inputs, dict(meta["sizes"]), dict(meta["scalars"]))
except BaseException:
    fail(3, "reference() raised:\n" + traceback.format_exc(limit=-3))

if not isinstance(result, dict):
    fail(5, f"reference() returned {type(result).__name__}, not a dict of arrays")
for name in meta["outputs"]:
    if name not in result:
        continue  # reported as a missing output by the caller
    value = result[name]
    if not isinstance(value, np.ndarray):
        fail(5, f"output {name!r} is a {type(value).__name__}, not a numpy.ndarray")
    np.save(os.path.join(workdir, f"out_{name}.npy"), np.ascontiguousarray(value))
