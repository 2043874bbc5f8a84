"""Tests of mlplatform.progress against a local HTTPS server.

Run: make test-python (Debian's /usr/bin/python3 -m unittest, no network).
"""

import http.server
import json
import os
import shutil
import socket
import ssl
import subprocess
import sys
import tempfile
import threading
import time
import unittest

SRC = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "src"))
sys.path.insert(0, SRC)

from mlplatform import progress  # noqa: E402


def make_cert(directory):
    key, crt = os.path.join(directory, "tls.key"), os.path.join(directory, "tls.crt")
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
                    "-subj", "/CN=localhost", "-addext", "subjectAltName=DNS:localhost,IP:127.0.0.1",
                    "-keyout", key, "-out", crt], check=True, capture_output=True)
    return crt, key


class Server:
    """An HTTPS server that answers with the next scripted (code, headers) and records requests."""

    def __init__(self, crt, key, script=(), port=0):
        self.requests = []
        self.script = list(script)
        outer = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self):
                body = self.rfile.read(int(self.headers["Content-Length"]))
                outer.requests.append((time.monotonic(), self.path, self.headers.get("Authorization"), json.loads(body)))
                code, headers = outer.script.pop(0) if outer.script else (202, {})
                self.send_response(code)
                for k, v in headers.items():
                    self.send_header(k, v)
                self.send_header("Content-Type", "application/json")
                self.end_headers()
                self.wfile.write(json.dumps({"code": code, "message": "scripted %d" % code}).encode())

            def log_message(self, *args):
                pass

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", port), Handler)
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.load_cert_chain(crt, key)
        self.httpd.socket = ctx.wrap_socket(self.httpd.socket, server_side=True)
        self.url = "https://localhost:%d/v1/namespaces/ns/trainingjobs/demo/progress" % self.httpd.server_address[1]
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()


@unittest.skipIf(shutil.which("openssl") is None, "openssl is needed to make a test certificate")
class ReporterTest(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp()
        self.crt, self.key = make_cert(self.dir)
        with open(self.crt) as f:
            self.ca = f.read()
        self.token = os.path.join(self.dir, "token")
        with open(self.token, "w") as f:
            f.write("pod-token\n")

    def tearDown(self):
        shutil.rmtree(self.dir)

    def reporter(self, server, **kw):
        r = progress.Reporter(server.url, self.token, self.ca, min_interval=kw.pop("min_interval", 0.05), **kw)
        self.addCleanup(r.close, 1.0)
        return r

    def serve(self, script=()):
        s = Server(self.crt, self.key, script)
        self.addCleanup(s.close)
        return s

    def test_sends_the_report_with_the_token(self):
        s = self.serve()
        r = self.reporter(s)
        r.report(step=3, total=10, epoch=1, metrics={"loss": 0.5, "nan": float("nan")})
        self.assertTrue(r.flush(10))
        self.assertEqual(len(s.requests), 1)
        _, path, auth, body = s.requests[0]
        self.assertEqual(path, "/v1/namespaces/ns/trainingjobs/demo/progress")
        self.assertEqual(auth, "Bearer pod-token")
        self.assertEqual(body, {"step": 3, "totalSteps": 10, "epoch": 1, "metrics": {"loss": 0.5}})

    def test_honours_retry_after_and_resends_the_newest(self):
        s = self.serve([(429, {"Retry-After": "1"})])
        r = self.reporter(s)
        r.report(step=1, total=10)
        self.assertTrue(r.flush(10))
        self.assertEqual(len(s.requests), 2)
        (t1, _, _, b1), (t2, _, _, b2) = s.requests
        self.assertGreaterEqual(t2 - t1, 0.95, "the retry came before Retry-After")
        self.assertEqual(b1, b2)

    def test_a_burst_sends_the_final_report_and_fewer_requests(self):
        s = self.serve()
        r = self.reporter(s, min_interval=0.5)
        start = time.monotonic()
        for step in range(1, 201):
            r.report(step=step, total=200)
        self.assertLess(time.monotonic() - start, 1.0, "report() blocked")
        self.assertTrue(r.flush(10))
        self.assertLess(len(s.requests), 10)
        self.assertEqual(s.requests[-1][3], {"step": 200, "totalSteps": 200})

    def test_failures_never_reach_the_training(self):
        s = self.serve([(400, {}), (403, {})])
        r = self.reporter(s)
        r.report(step=1)
        r.flush(10)
        r.report(step=2)
        r.flush(10)
        r.report(step="x")  # invalid: ignored with a warning
        r.report(step=-1)
        self.assertTrue(r.flush(10))
        self.assertEqual([b["step"] for _, _, _, b in s.requests], [1, 2])
        down = progress.Reporter("https://127.0.0.1:9/progress", self.token, self.ca, min_interval=0.05, timeout=1)
        down.report(step=1)
        self.assertFalse(down.flush(1), "a report nobody received counts as sent")
        down.close(1)

    def test_an_unreachable_endpoint_gets_the_report_once_it_answers(self):
        # A port nobody listens on yet refuses connections, as a
        # NetworkPolicy engine does for a pod it does not know yet.
        probe = socket.socket()
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
        probe.close()
        url = "https://localhost:%d/v1/namespaces/ns/trainingjobs/demo/progress" % port
        r = progress.Reporter(url, self.token, self.ca, min_interval=0.05, timeout=1)
        self.addCleanup(r.close, 1.0)
        r.report(step=5, total=5)
        time.sleep(0.5)
        s = Server(self.crt, self.key, port=port)
        self.addCleanup(s.close)
        self.assertTrue(r.flush(10), "the report was dropped after a refused connection")
        self.assertEqual([b for _, _, _, b in s.requests], [{"step": 5, "totalSteps": 5}])

    def test_a_long_outage_does_not_kill_the_sender(self):
        # After about 8.5 hours of failures at the 30 s cap, the backoff's
        # exponent overflowed a float and the thread died for good.
        s = self.serve()
        r = self.reporter(s)
        r._failures = 2000
        # One more failure: the token cannot be read yet.
        os.rename(self.token, self.token + ".later")
        r.report(step=7)
        deadline = time.monotonic() + 10
        while (r._failures == 2000 or r._sending) and r._thread.is_alive() and time.monotonic() < deadline:
            time.sleep(0.01)
        os.rename(self.token + ".later", self.token)
        with r._cond:  # the endpoint is back: skip the rest of the 30 s backoff
            r._not_before = 0.0
            r._cond.notify_all()
        self.assertTrue(r.flush(10), "no report went out after a long outage")
        self.assertTrue(r._thread.is_alive(), "the sender thread died")
        self.assertEqual(s.requests[-1][3], {"step": 7})

    def test_a_redirect_gets_neither_the_token_nor_counts_as_sent(self):
        # Whatever answers at the progress URL with a redirect must not get
        # the pod's token sent on to the address it names.
        elsewhere = []

        class Catch(http.server.BaseHTTPRequestHandler):
            def do_GET(self):
                elsewhere.append(self.headers.get("Authorization"))
                self.send_response(200)
                self.end_headers()

            do_POST = do_GET

            def log_message(self, *args):
                pass

        catch = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Catch)
        threading.Thread(target=catch.serve_forever, daemon=True).start()
        self.addCleanup(catch.server_close)
        self.addCleanup(catch.shutdown)
        target = "http://127.0.0.1:%d/stolen" % catch.server_address[1]
        s = self.serve([(302, {"Location": target}), (307, {"Location": target})])
        r = self.reporter(s)
        r.report(step=1)
        r.flush(10)
        r.report(step=2)
        r.flush(10)
        self.assertEqual(elsewhere, [], "the token followed a redirect")
        self.assertEqual(r.sent, 0, "a redirected report counted as sent")
        self.assertEqual(len(s.requests), 2)

    def test_numbers_too_large_are_ignored_not_raised(self):
        s = self.serve()
        r = self.reporter(s)
        r.report(step=float("inf"))
        r.report(step=1, metrics={"n": 10 ** 400, "loss": 0.5})
        self.assertTrue(r.flush(10))
        self.assertEqual([b for _, _, _, b in s.requests][-1:], [{"step": 1, "metrics": {"loss": 0.5}}])


# The variables the launchers of every framework set; a test's environment
# starts without them so that the machine's own cannot leak in.
LAUNCHER_VARIABLES = ("RANK", "TF_CONFIG", "JAX_PROCESS_ID", "OMPI_COMM_WORLD_RANK", "PMIX_RANK", "DMLC_TASK_ID", "PADDLE_TRAINER_ID")


def clean_environ():
    return {k: v for k, v in os.environ.items()
            if not k.startswith("MLPLATFORM_PROGRESS") and k not in LAUNCHER_VARIABLES}


class ModuleTest(unittest.TestCase):
    def test_without_the_environment_report_does_nothing(self):
        env = clean_environ()
        code = ("import sys; sys.path.insert(0, %r); from mlplatform import progress; "
                "progress.report(step=1, total=2); assert progress.flush(1); print('ok')") % SRC
        out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=30)
        self.assertEqual(out.stdout.strip(), "ok", out.stderr)
        env.update(MLPLATFORM_PROGRESS_URL="https://127.0.0.1:9/x", MLPLATFORM_PROGRESS_TOKEN_FILE="/nonexistent", RANK="1")
        out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=30)
        self.assertEqual((out.stdout.strip(), out.stderr), ("ok", ""), "rank 1 must not report")


if __name__ == "__main__":
    unittest.main()
