"""`python -m cloudpivot.webserver --fd N cloudpivot.asgi:application`: one uvicorn process on an inherited socket.

`manage.py serve` opens the listening socket once and starts several web processes accepting on it.
uvicorn's own `--fd` takes any descriptor for a UNIX socket, so the TCP connections it accepts keep
Nagle's algorithm on, and each response (headers and body are two writes) waits for the client's
delayed ACK: ~40 ms per request for one sequential keep-alive client (measured; docs/decisions.md).
Built from the descriptor itself, the socket is known to be TCP, and the event loop sets TCP_NODELAY
on every connection it accepts.
"""

from __future__ import annotations

import argparse
import socket

import uvicorn


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--fd", type=int, required=True, help="an inherited listening socket")
    parser.add_argument(
        "--serves",
        default="",
        help="who this process serves (`agents`: the host agents' own port); a label for `ps` and the benchmarks",
    )
    parser.add_argument("application", help="module:attribute of the ASGI application")
    args = parser.parse_args()
    listener = socket.socket(fileno=args.fd)  # family and type read from the socket: AF_INET(6), SOCK_STREAM
    config = uvicorn.Config(
        args.application,
        loop="uvloop",
        http="httptools",
        ws="websockets-sansio",
        lifespan="off",
        proxy_headers=False,  # the embedded default has no proxy in front; see docs/deploy.md for one
        timeout_graceful_shutdown=5,  # a Runner's long poll must not hold up Ctrl-C
    )
    uvicorn.Server(config).run(sockets=[listener])


if __name__ == "__main__":
    main()
