#!/usr/bin/env python3
"""Prints a TCP port that nothing listens on at HOST: PREFERRED when it can be bound there, else one
the kernel picks. The shell's free_port (scripts/lib/pg.sh) runs it.

Usage: free_port.py HOST [PREFERRED]
"""

import socket
import sys


def bindable(host, port):
    with socket.socket() as s:
        try:
            s.bind((host, port))
        except OSError:
            return False
        return True


def any_port(host):
    with socket.socket() as s:
        s.bind((host, 0))
        return s.getsockname()[1]


def main():
    if len(sys.argv) not in (2, 3):
        sys.exit(__doc__.strip().splitlines()[-1])
    host = sys.argv[1]
    if len(sys.argv) == 3 and bindable(host, int(sys.argv[2])):
        print(sys.argv[2])
    else:
        print(any_port(host))


if __name__ == "__main__":
    main()
