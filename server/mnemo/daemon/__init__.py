"""The owner process of a store (`mnemo daemon`) and the client proxy every other process uses."""

from mnemo.daemon.paths import socket_path

__all__ = ["socket_path"]
