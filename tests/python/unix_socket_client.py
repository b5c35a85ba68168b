"""grpcio over a Unix socket, with grpcio's default authority (the socket's path): calls each
method named on the command line on one channel, with the request bytes given in hex, and
prints each answer in hex, or `ERROR <code> <details>`.

usage: unix_socket_client.py SOCKET TOKEN METHOD REQUEST_HEX [METHOD REQUEST_HEX ...]
"""

import sys

import grpc


def main() -> None:
    socket, token, rest = sys.argv[1], sys.argv[2], sys.argv[3:]
    with grpc.insecure_channel(f"unix://{socket}") as channel:
        for method, request in zip(rest[::2], rest[1::2]):
            call = channel.unary_unary(method)
            try:
                answer = call(
                    bytes.fromhex(request),
                    metadata=[("authorization", f"Bearer {token}")],
                    timeout=20,
                )
                print(answer.hex(), flush=True)
            except grpc.RpcError as error:
                print(f"ERROR {error.code().name} {error.details()}", flush=True)


if __name__ == "__main__":
    main()
