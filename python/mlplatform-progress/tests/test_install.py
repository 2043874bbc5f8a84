"""The package installs into an image by its one documented step.

Run: make test-python (Debian's /usr/bin/python3 -m unittest, no network).
"""

import os
import shutil
import subprocess
import sys
import tempfile
import unittest

PROJECT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))


def has(module):
    return subprocess.run([sys.executable, "-c", "import " + module], capture_output=True).returncode == 0


@unittest.skipUnless(has("pip") and has("setuptools") and has("wheel"), "pip, setuptools and wheel are needed (make test-python installs them)")
class InstallTest(unittest.TestCase):
    def test_pip_installs_the_project_and_its_wheel_offline(self):
        work = tempfile.mkdtemp()
        self.addCleanup(shutil.rmtree, work)
        # setuptools writes build/ and egg-info next to the sources: build
        # from a copy, never in the repository.
        src = os.path.join(work, "mlplatform-progress")
        shutil.copytree(PROJECT, src, ignore=shutil.ignore_patterns("__pycache__", "tests"))
        pip = [sys.executable, "-m", "pip", "--disable-pip-version-check", "--no-cache-dir", "--isolated"]
        offline = ["--no-deps", "--no-index", "--no-build-isolation"]
        target = os.path.join(work, "site")
        run = lambda *args: subprocess.run(list(args), capture_output=True, text=True, timeout=300)
        out = run(*pip, "install", *offline, "--target", target, src)
        self.assertEqual(out.returncode, 0, out.stdout + out.stderr)
        self.assert_importable(target)
        out = run(*pip, "wheel", *offline, "--wheel-dir", os.path.join(work, "dist"), src)
        self.assertEqual(out.returncode, 0, out.stdout + out.stderr)
        wheels = os.listdir(os.path.join(work, "dist"))
        self.assertEqual(wheels, ["mlplatform_progress-0.1.0-py3-none-any.whl"])
        # Installing the wheel needs nothing at all, not even setuptools.
        target = os.path.join(work, "site-wheel")
        out = run(*pip, "install", "--no-deps", "--no-index", "--target", target, os.path.join(work, "dist", wheels[0]))
        self.assertEqual(out.returncode, 0, out.stdout + out.stderr)
        self.assert_importable(target)

    def assert_importable(self, target):
        env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
        env["PYTHONPATH"] = target
        code = "from mlplatform import progress; import os; print(progress.__file__.startswith(%r), progress.is_rank_zero({}))" % target
        out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, cwd=target, timeout=60)
        self.assertEqual(out.stdout.strip(), "True True", out.stderr)


if __name__ == "__main__":
    unittest.main()
