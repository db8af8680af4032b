"""setuptools shim: cffi_modules cannot be declared in pyproject.toml (python-cffi/cffi#55)."""

from setuptools import setup

setup(cffi_modules=["koordlet/system/_native_build.py:ffibuilder"])
