"""A forked child of a process that used spyre works: eager ops (torch's CPU kernels on device memory,
run with OpenMP), Triton launches on the runtime's core threads, and plain CPU ops. Without care the
child's first parallel region waits forever for the parent's libgomp team."""
import subprocess
import sys
import textwrap

import pytest

SCRIPT = textwrap.dedent('''
    import os, sys, faulthandler
    import torch, triton, triton.language as tl

    @triton.jit
    def twice(X, O, n, BLOCK: tl.constexpr):
        i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        tl.store(O + i, tl.load(X + i, mask=i < n) * 2, mask=i < n)

    def work(tag):
        x = torch.arange(512 * 512, dtype=torch.float32).reshape(512, 512) / 1e5
        xs = x.to("spyre")
        assert torch.allclose(torch.sin(xs).cpu(), torch.sin(x))          # the eager fallback
        assert torch.allclose((xs @ xs).cpu(), x @ x, rtol=1e-4)
        out = torch.empty_like(xs)
        twice[(64,)](xs, out, xs.numel(), BLOCK=4096)                      # many programs: every core
        assert torch.equal(out.cpu(), x * 2)
        assert torch.allclose(x @ x, (x.double() @ x.double()).float(), rtol=1e-4)  # plain CPU
        print(tag, "ok", torch.get_num_threads(), flush=True)

    torch.set_num_threads(int(sys.argv[1]))
    if sys.argv[2] == "spyre":
        work("parent")
    else:
        torch.sin(torch.randn(512, 512))  # OpenMP used by the CPU alone
    pid = os.fork()
    if pid == 0:
        faulthandler.dump_traceback_later(30, exit=True)
        if sys.argv[2] == "spyre":
            work("child")
        else:
            print("child threads", torch.get_num_threads(), flush=True)
        os._exit(0)
    _, status = os.waitpid(pid, 0)
    sys.exit(os.waitstatus_to_exitcode(status))
''')


def run(tmp_path, threads, parent_use):
    path = tmp_path / "fork_child.py"
    path.write_text(SCRIPT)
    try:
        p = subprocess.run([sys.executable, str(path), str(threads), parent_use], capture_output=True,
                           text=True, timeout=150)
    except subprocess.TimeoutExpired as e:
        pytest.fail(f"the forked child hung:\n{e.stdout}\n{e.stderr}")
    assert p.returncode == 0, p.stdout + p.stderr
    return p.stdout


@pytest.mark.parametrize("threads", [1, 2])
def test_forked_child_of_a_spyre_process_runs_eager_ops_and_kernels(tmp_path, threads):
    out = run(tmp_path, threads, "spyre")
    assert f"parent ok {threads}" in out
    assert "child ok 1" in out  # intra-op threads: one in the child, whatever the parent had


def test_fork_leaves_threads_alone_when_spyre_was_not_used(tmp_path):
    # spyre did not start the parent's OpenMP team here: torch's own settings stand
    assert "child threads 2" in run(tmp_path, 2, "cpu")
