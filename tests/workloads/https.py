"""The workloads suite's HTTPS server: serves the files of a directory over
HTTP/1.1 with TLS, on every address given, until its stdin closes.

usage: python3 https.py DIR CERT KEY ADDRESS:PORT...

Prints "ready" once every socket listens (the suite waits for that line).
"""

import functools
import http.server
import os
import ssl
import sys
import threading


class Quiet(http.server.SimpleHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass


class Server(http.server.ThreadingHTTPServer):
    daemon_threads = True


class V6Server(Server):
    import socket

    address_family = socket.AF_INET6


def main():
    root, cert, key, *addresses = sys.argv[1:]
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)
    handler = functools.partial(Quiet, directory=root)
    for a in addresses:
        host, port = a.rsplit(":", 1)
        host = host.strip("[]")
        cls = V6Server if ":" in host else Server
        server = cls((host, int(port)), handler)
        server.socket = context.wrap_socket(server.socket, server_side=True)
        threading.Thread(target=server.serve_forever, daemon=True).start()
    print("ready", flush=True)
    sys.stdin.read()
    os._exit(0)


if __name__ == "__main__":
    main()
