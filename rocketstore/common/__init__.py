"""The vocabulary every layer shares: record codes and flags, property names, system topics,
permission bits, SEND header names, the batch body codec, Java ``.properties`` and fastjson
syntax, the atomic file writer.

Pure Python, native-free, importing nothing else of rocketstore: the store, the broker, the
name server, the clients and the remoting layer all import from here (the lowest layer of the
import contract in pyproject.toml).
"""
