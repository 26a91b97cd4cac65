//! The generated module's pytest test, `test_<module>.py`: every configuration against the
//! task's reference at a small size where its constraints hold on the test machine's device,
//! the dispatched call and a refused wrong length. Built-in tasks compare with a NumPy
//! reference written here; task-file tasks with the reference cases `kf export` stored beside
//! the module (`reference/<task>/`, [`crate::reference`]), under the task's tolerance.

use std::fmt::Write as _;

use crate::group::TaskGroup;

/// The NumPy reference and one call of a built-in task at `n` (every size `n`), as pytest code.
fn reference_py(task: &str) -> &'static str {
    match task {
        "gemm" => {
            "def gemm_reference(n, a, b):\n\
             \x20   a64, b64 = a.reshape(n, n).astype(np.float64), b.reshape(n, n).astype(np.float64)\n\
             \x20   return (a64 @ b64).astype(np.float32).reshape(-1)\n\
             \n\n\
             def gemm_case(index, n):\n\
             \x20   a, b = data(n * n, 1), data(n * n, 2)\n\
             \x20   if index is None:\n\
             \x20       got = m.gemm(n, n, n, a, b, kernels=KERNELS)\n\
             \x20   else:\n\
             \x20       got = m.gemm_with(index, n, n, n, a, b, kernels=KERNELS)\n\
             \x20   return got, gemm_reference(n, a, b)\n\
             \n\n\
             def gemm_fits(index, n):\n\
             \x20   try:\n\
             \x20       m.gemm_check(index, n, n, n, kernels=KERNELS)\n\
             \x20       return True\n\
             \x20   except m.ConstraintFailed:\n\
             \x20       return False\n\
             \n\n\
             def gemm_served(n):\n\
             \x20   try:\n\
             \x20       return m.gemm_choice(n, n, n, kernels=KERNELS)\n\
             \x20   except m.NoConfiguration:\n\
             \x20       return None\n"
        }
        _ => {
            "def softmax_reference(n, x):\n\
             \x20   x64 = x.reshape(n, n).astype(np.float64)\n\
             \x20   e = np.exp(x64 - x64.max(axis=1, keepdims=True))\n\
             \x20   return (e / e.sum(axis=1, keepdims=True)).astype(np.float32).reshape(-1)\n\
             \n\n\
             def softmax_case(index, n):\n\
             \x20   x = data(n * n, 3)\n\
             \x20   if index is None:\n\
             \x20       got = m.softmax(n, n, x, kernels=KERNELS)\n\
             \x20   else:\n\
             \x20       got = m.softmax_with(index, n, n, x, kernels=KERNELS)\n\
             \x20   return got, softmax_reference(n, x)\n\
             \n\n\
             def softmax_fits(index, n):\n\
             \x20   try:\n\
             \x20       m.softmax_check(index, n, n, kernels=KERNELS)\n\
             \x20       return True\n\
             \x20   except m.ConstraintFailed:\n\
             \x20       return False\n\
             \n\n\
             def softmax_served(n):\n\
             \x20   try:\n\
             \x20       return m.softmax_choice(n, n, kernels=KERNELS)\n\
             \x20   except m.NoConfiguration:\n\
             \x20       return None\n"
        }
    }
}

pub(super) fn test_py(module: &str, groups: &[TaskGroup<'_>]) -> String {
    let mut out = format!(
        "# Written by `kf export --python`: every configuration against a NumPy reference at a\n\
         # small size where its constraints hold on this device, and the dispatched call.\n\
         import json\n\
         import os\n\
         \n\
         import numpy as np\n\
         import pytest\n\
         \n\
         import {module} as m\n\
         \n\
         KERNELS = m.Kernels()\n\
         SMALL = [16, 32, 64, 96, 128, 256]\n\
         \n\n\
         def data(length, seed):\n\
         \x20   \"\"\"Deterministic values in [0.5, 1.5).\"\"\"\n\
         \x20   return np.random.default_rng(seed).uniform(0.5, 1.5, length).astype(np.float32)\n\
         \n\n\
         def close(got, want):\n\
         \x20   bad = np.abs(got - want) > 1e-3 * np.maximum(np.abs(want), 1e-3)\n\
         \x20   assert not bad.any(), f\"element {{int(np.argmax(bad))}}: {{got[bad][0]}} against the reference's {{want[bad][0]}}\"\n"
    );
    if groups.iter().any(|g| g.task_file.is_some()) {
        out.push_str(CASE_HELPERS);
    }
    for g in groups {
        if g.task_file.is_some() {
            task_file_tests(&mut out, g);
            continue;
        }
        let task = g.function();
        let task = task.as_str();
        let upper = task.to_ascii_uppercase();
        out.push_str("\n\n");
        out.push_str(reference_py(task));
        let wrong = match task {
            "gemm" => "m.gemm(16, 16, 16, data(15, 1), data(256, 2), kernels=KERNELS)",
            _ => "m.softmax(16, 16, data(15, 1), kernels=KERNELS)",
        };
        let _ = write!(
            out,
            "\n\n@pytest.mark.parametrize(\"index\", range(len(m.{upper}_CONFIGURATIONS)))\n\
             def test_{task}_each_configuration_matches_the_reference_at_a_small_size(index):\n\
             \x20   n = next((n for n in SMALL if {task}_fits(index, n)), None)\n\
             \x20   if n is None:\n\
             \x20       pytest.skip(f\"{{m.{upper}_CONFIGURATIONS[index]}}: no small size where its constraints hold here\")\n\
             \x20   got, want = {task}_case(index, n)\n\
             \x20   close(got, want)\n\
             \n\n\
             def test_{task}_the_dispatched_call_matches_the_reference():\n\
             \x20   n = next((n for n in SMALL if {task}_served(n) is not None), None)\n\
             \x20   assert n is not None, \"no small size some configuration serves\"\n\
             \x20   got, want = {task}_case(None, n)\n\
             \x20   close(got, want)\n\
             \x20   again, _ = {task}_case(None, n)\n\
             \x20   np.testing.assert_array_equal(got, again)\n\
             \n\n\
             def test_{task}_a_wrong_length_is_refused():\n\
             \x20   with pytest.raises(m.BadCall):\n\
             \x20       {wrong}\n"
        );
    }
    out
}

/// Reading stored reference cases and the evaluator's comparison, in NumPy.
const CASE_HELPERS: &str = r#"

HERE = os.path.dirname(os.path.abspath(__file__))
LITTLE_ENDIAN = {"f32": "<f4", "f16": "<f2", "i32": "<i4"}


def reference_cases(task):
    """The cases `kf export` stored for `task`: their folder and index entries."""
    folder = os.path.join(HERE, "reference", task)
    with open(os.path.join(folder, "index.json")) as f:
        return folder, json.load(f)["cases"]


def stored(folder, buffer, key):
    """A buffer's stored data (`input`, `expected`; `allowance` is f64)."""
    dtype = "<f8" if key == "allowance" else LITTLE_ENDIAN[buffer["dtype"]]
    return np.fromfile(os.path.join(folder, buffer[key]), dtype=dtype)


def matches(name, got, want, tol, allowance):
    """kf_eval::verify::compare_buffers_with: every element finite and within
    atol + rtol*|ref| (+ the accumulation allowance), more than min_fraction_within of them
    within relative_threshold, cosine similarity at least min_cosine."""
    got = np.asarray(got).astype(np.float64).reshape(-1)
    want = want.astype(np.float64)
    assert got.shape == want.shape, f"{name}: {got.size} elements, the reference {want.size}"
    finite = np.isfinite(got)
    assert finite.all(), f"{name}: element {int(np.argmin(finite))} is {got[~finite][0]}"
    extra = 0.0 if allowance is None else allowance
    err = np.abs(got - want)
    bad = err > tol["atol"] + tol["rtol"] * np.abs(want) + extra
    assert not bad.any(), (f"{name}: element {int(np.argmax(bad))} is {got[bad][0]}, "
                           f"the reference {want[bad][0]}")
    within = (err <= tol["relative_threshold"] * np.abs(want)) | (err <= tol["atol"] + extra)
    fraction = float(within.mean()) if within.size else 1.0
    no, nr = float(np.dot(got, got)), float(np.dot(want, want))
    if no == 0.0 and nr == 0.0:
        cosine = 1.0
    elif no == 0.0 or nr == 0.0:
        cosine = 0.0
    else:
        cosine = float(np.dot(got, want)) / (np.sqrt(no) * np.sqrt(nr))
    assert fraction > tol["min_fraction_within"], f"{name}: {fraction} within"
    assert cosine >= tol["min_cosine"], f"{name}: cosine {cosine}"
"#;

/// The pytest functions of a task-file task: every stored case through every configuration
/// whose constraints hold there, through the dispatched call, and a wrong length refused.
fn task_file_tests(out: &mut String, g: &TaskGroup<'_>) {
    let sig = g.signature;
    let task = g.function();
    let upper = task.to_ascii_uppercase();
    let quoted = |v: Vec<&str>| {
        v.iter()
            .map(|n| format!("{n:?}"))
            .collect::<Vec<_>>()
            .join(", ")
    };
    let size_names = quoted(sig.sizes.iter().map(|s| s.as_ref()).collect());
    let scalar_names = quoted(sig.scalars.iter().map(|s| s.name.as_ref()).collect());
    let read = quoted(
        sig.buffers
            .iter()
            .filter(|b| b.access.reads())
            .map(|b| b.name.as_ref())
            .collect(),
    );
    let written = quoted(
        sig.buffers
            .iter()
            .filter(|b| b.access.writes())
            .map(|b| b.name.as_ref())
            .collect(),
    );
    let _ = write!(
        out,
        "\n\n{upper}_FOLDER, {upper}_CASES = reference_cases({task:?})\n\
         \n\n\
         def {task}_arguments(case):\n\
         \x20   \"\"\"The sizes, scalars and arrays of a stored case, in the call's order.\"\"\"\n\
         \x20   buffers = {{b[\"name\"]: b for b in case[\"buffers\"]}}\n\
         \x20   sizes = [case[\"sizes\"][n] for n in [{size_names}]]\n\
         \x20   scalars = [case[\"scalars\"][n] for n in [{scalar_names}]]\n\
         \x20   arrays = [stored({upper}_FOLDER, buffers[n], \"input\") for n in [{read}]]\n\
         \x20   return sizes, scalars, arrays\n\
         \n\n\
         def {task}_run(index, case):\n\
         \x20   \"\"\"Runs configuration `index` (None: the dispatched one) on `case` and checks every\n\
         \x20   buffer the kernel writes against the reference.\"\"\"\n\
         \x20   sizes, scalars, arrays = {task}_arguments(case)\n\
         \x20   if index is None:\n\
         \x20       got = m.{task}(*sizes, *scalars, *arrays, kernels=KERNELS)\n\
         \x20   else:\n\
         \x20       got = m.{task}_with(index, *sizes, *scalars, *arrays, kernels=KERNELS)\n\
         \x20   names = [{written}]\n\
         \x20   got = (got,) if len(names) == 1 else got\n\
         \x20   buffers = {{b[\"name\"]: b for b in case[\"buffers\"]}}\n\
         \x20   for name, array in zip(names, got):\n\
         \x20       b = buffers[name]\n\
         \x20       allowance = stored({upper}_FOLDER, b, \"allowance\") if b.get(\"allowance\") else None\n\
         \x20       matches(f\"{{name}} at {{case['sizes']}}\", array, stored({upper}_FOLDER, b, \"expected\"),\n\
         \x20               b[\"tolerance\"], allowance)\n\
         \n\n\
         def {task}_fits(index, case):\n\
         \x20   sizes, _, _ = {task}_arguments(case)\n\
         \x20   try:\n\
         \x20       m.{task}_check(index, *sizes, kernels=KERNELS)\n\
         \x20       return True\n\
         \x20   except m.ConstraintFailed:\n\
         \x20       return False\n\
         \n\n\
         @pytest.mark.parametrize(\"index\", range(len(m.{upper}_CONFIGURATIONS)))\n\
         def test_{task}_each_configuration_matches_the_reference_at_a_small_size(index):\n\
         \x20   cases = [c for c in {upper}_CASES if {task}_fits(index, c)]\n\
         \x20   if not cases:\n\
         \x20       pytest.skip(f\"{{m.{upper}_CONFIGURATIONS[index]}}: no stored case where its constraints hold here\")\n\
         \x20   for case in cases:\n\
         \x20       {task}_run(index, case)\n\
         \n\n\
         def test_{task}_the_dispatched_call_matches_the_reference():\n\
         \x20   served = 0\n\
         \x20   for case in {upper}_CASES:\n\
         \x20       sizes, _, _ = {task}_arguments(case)\n\
         \x20       try:\n\
         \x20           m.{task}_choice(*sizes, kernels=KERNELS)\n\
         \x20       except m.NoConfiguration:\n\
         \x20           continue\n\
         \x20       {task}_run(None, case)\n\
         \x20       served += 1\n\
         \x20   assert served > 0, \"no stored case some configuration serves\"\n\
         \n\n\
         def test_{task}_a_wrong_length_is_refused():\n\
         \x20   sizes, scalars, arrays = {task}_arguments({upper}_CASES[0])\n\
         \x20   if not arrays:\n\
         \x20       pytest.skip(\"the task reads no array\")\n\
         \x20   arrays[0] = arrays[0][:-1]\n\
         \x20   with pytest.raises(m.BadCall):\n\
         \x20       m.{task}(*sizes, *scalars, *arrays, kernels=KERNELS)\n"
    );
}
