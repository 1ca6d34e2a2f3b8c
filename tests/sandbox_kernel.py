"""One course-sandbox kernel started the way grading starts it (IPC sockets in a folder of its own), for the
tests that look at the sandbox from inside: ``k.run(code)`` returns what the cell printed and its errors."""
from __future__ import annotations

import os
import shutil
import subprocess
import tempfile


class Kernel:
    def __init__(self, workdir: str, env: dict | None = None, timeout: float = 60):
        from jupyter_client.manager import KernelManager

        self.timeout = timeout
        self.ipc = tempfile.mkdtemp(prefix="nbg-ipc-")
        self.km = KernelManager(kernel_name="course-sandbox", transport="ipc", ip=os.path.join(self.ipc, "kernel"))
        try:
            self.km.start_kernel(cwd=workdir, env=dict(os.environ, **(env or {})),
                                 stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        except Exception:
            shutil.rmtree(self.ipc, ignore_errors=True)
            raise
        self.kc = self.km.client()
        self.kc.start_channels()
        self.kc.wait_for_ready(timeout=120)

    def run(self, code: str, timeout: float | None = None) -> str:
        out = []

        def hook(msg):
            c = msg.get("content", {})
            if msg.get("msg_type") == "stream":
                out.append(c.get("text", ""))
            elif msg.get("msg_type") == "error":
                out.append(f"{c.get('ename')}: {c.get('evalue')}\n")

        self.kc.execute_interactive(code, timeout=timeout or self.timeout, output_hook=hook)
        return "".join(out)

    def close(self):
        self.kc.stop_channels()
        self.km.shutdown_kernel(now=True)
        shutil.rmtree(self.ipc, ignore_errors=True)
