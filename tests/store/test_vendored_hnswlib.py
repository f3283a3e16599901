"""hebbs' vendored hnswlib (hebbs_hnswlib) lives beside the real hnswlib in one process.

Both modules bind the same C++ class; before its types were registered module-locally, the second
import raised `generic_type: type "Index" is already registered!`, so an application that used
hnswlib could not open a vault. Each import order runs in a fresh interpreter (a module imported
once stays imported), and each side is used after the other is loaded.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

import processes

_BOTH = """
import json, sys
import numpy as np
order = sys.argv[1].split(",")
mods = {name: __import__(name) for name in order}
rng = np.random.default_rng(7)
data = rng.standard_normal((200, 16)).astype(np.float32)
answers = {}
for name, mod in mods.items():
    index = mod.Index(space="cosine", dim=16)
    index.init_index(max_elements=200, ef_construction=100, M=8)
    index.add_items(data, np.arange(200))
    index.set_ef(100)
    labels, _ = index.knn_query(data[:5], k=1)
    answers[name] = labels[:, 0].tolist()
    brute = mod.BFIndex(space="cosine", dim=16)
    brute.init_index(200)
    brute.add_items(data, np.arange(200))
    answers[name + ".bf"] = brute.knn_query(data[:5], k=1)[0][:, 0].tolist()
    # A copy made through the other constructor, which takes an Index: the module's own type is found.
    answers[name + ".copy"] = mod.Index(index).knn_query(data[:5], k=1)[0][:, 0].tolist()

from hebbs import Engine
with Engine.open(sys.argv[2]) as eng:
    m = eng.remember("the deploy key rotates every ninety days")
    eng.remember("lunch is at noon on Fridays")
    answers["recall"] = eng.recall("how often is the deploy key rotated", top_k=1).results[0].memory.id == m.id
print(json.dumps(answers))
"""


@pytest.mark.parametrize("order", ["hnswlib,hebbs_hnswlib", "hebbs_hnswlib,hnswlib"])
def test_hnswlib_and_hebbs_in_one_process(order: str, tmp_path: Path) -> None:
    done = processes.run([sys.executable, "-c", _BOTH, order, str(tmp_path / "vault")],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    answers = json.loads(done.stdout.strip().splitlines()[-1])
    for name in order.split(","):
        assert answers[name] == [0, 1, 2, 3, 4]
        assert answers[name + ".bf"] == [0, 1, 2, 3, 4]
        assert answers[name + ".copy"] == [0, 1, 2, 3, 4]
    assert answers["recall"] is True


# Instructions an x86-64 CPU without AVX lacks: VEX/EVEX-encoded ones (mnemonics starting with v) and the
# bit-manipulation extensions a compiler emits under -march=native.
_POST_BASELINE = ("popcnt", "lzcnt", "tzcnt", "andn", "bextr", "blsi", "blsr", "blsmsk", "shlx", "shrx", "sarx",
                  "rorx", "pdep", "pext", "mulx", "movbe")


def test_only_the_dispatched_kernels_use_instructions_past_the_baseline():
    """A wheel built on one CPU must load and run on another: outside hnswlib's AVX and AVX-512 kernels,
    which AVXCapable()/AVX512Capable() pick at run time, the extension keeps to baseline x86-64."""
    import platform
    import shutil

    import hebbs_hnswlib

    if platform.machine() != "x86_64":
        pytest.fail(f"this check reads x86-64 code; the machine is {platform.machine()}")
    assert shutil.which("objdump"), "objdump (binutils) is needed to read the extension's code"
    listing = processes.run(["objdump", "-d", "--no-show-raw-insn", "-C", hebbs_hnswlib.__file__],
                             capture_output=True, text=True, check=True).stdout
    function, outside = "", {}
    for line in listing.splitlines():
        if line.endswith(">:") and " <" in line:
            function = line.split(" <", 1)[1][:-2]
        elif line.startswith(" ") and "\t" in line:
            mnemonic = line.split("\t")[1].split(" ")[0]
            if (mnemonic.startswith("v") or mnemonic in _POST_BASELINE) and "AVX" not in function:
                outside.setdefault(function, set()).add(mnemonic)
    assert not outside, f"instructions past baseline x86-64 outside the dispatched kernels: {outside}"
